<?php

declare(strict_types=1);

namespace Settle\Example;

/**
 * A small client of Settle's JSON API (the OrderService's REST paths),
 * over curl. Errors come back as google.rpc.Status JSON
 * ({"code": 5, "message": "order not found", "details": []}) with the
 * matching HTTP status.
 */
final class SettleClient
{
    /** The deadline of one call; Settle answers a charge within its gateway timeout (10 s by default). */
    private const TIMEOUT_SECONDS = 30;

    public function __construct(
        private readonly string $baseUrl,
        #[\SensitiveParameter] private readonly string $apiKey,
    ) {
        if ($baseUrl === '' || $apiKey === '') {
            throw new \InvalidArgumentException('Settle needs its JSON URL (SETTLE_JSON_URL) and a checkout key (SETTLE_KEY)');
        }
    }

    /** The order of $merchantReference, or null when there is none. */
    public function getOrderByReference(string $merchantReference): ?array
    {
        try {
            $res = $this->call('GET', '/v1/orders?merchant_reference=' . rawurlencode($merchantReference));
        } catch (SettleError $e) {
            if ($e->grpcCode === SettleError::NOT_FOUND) {
                return null;
            }
            throw $e;
        }
        return $res['order'] ?? null;
    }

    /**
     * Creates the order (idempotent on merchant_reference) and charges it
     * under $requestId: the same request id again is the same attempt,
     * never a second charge. Returns {order, attempt, ...}.
     */
    public function createAndChargeOrder(string $merchantReference, int $amountMinor, string $currency, string $paymentMethod, string $requestId): array
    {
        return $this->call('POST', '/v1/orders:createAndCharge', [
            'merchant_reference' => $merchantReference,
            'amount' => ['currency' => $currency, 'amount_minor' => $amountMinor],
            'payment_method' => $paymentMethod,
            'request_id' => $requestId,
        ]);
    }

    private function call(string $method, string $path, ?array $body = null): array
    {
        $ch = curl_init(rtrim($this->baseUrl, '/') . $path);
        $headers = ['Authorization: Bearer ' . $this->apiKey, 'Accept: application/json'];
        $opts = [
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_TIMEOUT => self::TIMEOUT_SECONDS,
            CURLOPT_CONNECTTIMEOUT => 5,
        ];
        if ($body !== null) {
            $opts[CURLOPT_POSTFIELDS] = json_encode($body, JSON_THROW_ON_ERROR);
            $headers[] = 'Content-Type: application/json';
        }
        $opts[CURLOPT_HTTPHEADER] = $headers;
        curl_setopt_array($ch, $opts);
        $raw = curl_exec($ch);
        $status = (int) curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
        $err = curl_error($ch);
        curl_close($ch);
        if ($raw === false) {
            // Nothing came back: the call may or may not have reached
            // Settle. Retrying under the same request id is safe.
            throw new SettleError(SettleError::UNAVAILABLE, 0, "no answer from Settle: $err");
        }
        $json = json_decode((string) $raw, true);
        if ($status >= 200 && $status < 300 && is_array($json)) {
            return $json;
        }
        $code = is_array($json) && isset($json['code']) ? (int) $json['code'] : SettleError::UNKNOWN;
        $message = is_array($json) && isset($json['message']) ? (string) $json['message'] : "HTTP $status";
        throw new SettleError($code, $status, $message);
    }
}
