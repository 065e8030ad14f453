<?php

declare(strict_types=1);

namespace Settle\Example;

/**
 * Charges one checkout through Settle, shaped like a Laravel queued job
 * (a class with public properties that the queue serializes, and
 * handle()); in a Laravel application it would implement ShouldQueue and
 * use Dispatchable, InteractsWithQueue, Queueable and SerializesModels,
 * and $tries and backoff() would mean what they mean here.
 *
 * The request id is made once, when the checkout dispatches the job, and
 * travels in the job's serialized payload: however often the queue
 * delivers the job (a worker killed mid-charge, a timeout, a retry), every
 * delivery charges under the same request id, and Settle replays the first
 * one's attempt instead of charging again. Made inside handle(), it would
 * be new at each delivery, and each delivery a new attempt.
 */
final class ChargeOrderJob
{
    /** Deliveries before the job is failed. An unknown outcome is retried until Settle has settled it. */
    public int $tries = 25;

    public readonly string $requestId;

    public function __construct(
        public readonly string $merchantReference,
        public readonly int $amountMinor,
        public readonly string $currency,
        public readonly string $paymentMethod,
        ?string $requestId = null,
    ) {
        $this->requestId = $requestId ?? 'chk_' . bin2hex(random_bytes(16));
    }

    /** The checkout's side: make the job (and so its request id) and queue it. */
    public static function dispatch(FileQueue $queue, string $merchantReference, int $amountMinor, string $currency, string $paymentMethod): self
    {
        $job = new self($merchantReference, $amountMinor, $currency, $paymentMethod);
        $queue->push($job);
        return $job;
    }

    /** Seconds before the next delivery after $attempts deliveries: 0.5 s doubling, at most 30 s. */
    public function backoff(int $attempts): float
    {
        return min(0.5 * 2 ** max(0, $attempts - 1), 30.0);
    }

    /**
     * Charges the checkout once. Returns the order when the job is done;
     * throws RetryLater when the outcome is not known yet (the queue
     * delivers the job again), and JobFailed when retrying cannot help.
     */
    public function handle(SettleClient $settle, callable $log): array
    {
        // The early return: an earlier delivery (or another worker) charged it.
        $existing = $settle->getOrderByReference($this->merchantReference);
        if ($existing !== null && self::paid($existing)) {
            $log('already paid', ['order_id' => $existing['id'], 'state' => $existing['state']]);
            return $existing;
        }

        $log('charging', ['request_id' => $this->requestId, 'state' => $existing['state'] ?? 'NEW']);
        try {
            $res = $settle->createAndChargeOrder($this->merchantReference, $this->amountMinor, $this->currency, $this->paymentMethod, $this->requestId);
        } catch (SettleError $e) {
            if ($e->retryable()) {
                throw new RetryLater("Settle is unavailable: {$e->getMessage()}", 0, $e);
            }
            throw new JobFailed("Settle refused the charge ({$e->grpcCode}): {$e->getMessage()}", 0, $e);
        }
        $order = $res['order'];
        switch ($order['state']) {
            case 'ORDER_STATE_PAID':
                $log('paid', ['order_id' => $order['id']]);
                return $order;
            case 'ORDER_STATE_CHARGING':
                // The gateway has not said yet, or another delivery's call
                // is in flight: not a failure. Ask again later, under the
                // same request id.
                $log('charging in flight', ['order_id' => $order['id']]);
                throw new RetryLater("order {$order['id']} is CHARGING");
            case 'ORDER_STATE_PENDING':
                // Declined, or provably not sent: this request id replays
                // that answer. A new attempt is the customer's: a new job.
                $attempt = $res['attempt'] ?? [];
                $code = $attempt['decline_code'] ?? $attempt['declineCode'] ?? '';
                $log('declined', ['order_id' => $order['id'], 'decline_code' => $code]);
                throw new JobFailed("order {$order['id']} declined $code");
            default:
                // REQUIRES_ACTION (the checkout shows the page), NEEDS_REVIEW,
                // CANCELED, ...: not this job's to decide.
                $log('not charged here', ['order_id' => $order['id'], 'state' => $order['state']]);
                return $order;
        }
    }

    /** Whether the order's money has moved. */
    private static function paid(array $order): bool
    {
        return in_array($order['state'] ?? '', ['ORDER_STATE_PAID', 'ORDER_STATE_PARTIALLY_REFUNDED', 'ORDER_STATE_REFUNDED'], true);
    }
}
