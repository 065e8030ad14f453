<?php

declare(strict_types=1);

namespace Settle\Example;

/**
 * Verifies Settle's events as the Standard Webhooks spec says, with
 * hash_hmac alone: the signed content is "<webhook-id>.<webhook-timestamp>.<body>",
 * the signature base64(HMAC-SHA256(key, content)), and webhook-signature
 * holds one "v1,<signature>" per secret, space-separated while a secret
 * is rotated; one match is enough. The key of a whsec_ secret is the
 * base64 after the prefix; any other secret is its own bytes.
 */
final class WebhookVerifier
{
    /** How far webhook-timestamp may be from now, either way: a replayed old delivery is refused. */
    public const TOLERANCE_SECONDS = 300;

    private readonly string $key;

    public function __construct(#[\SensitiveParameter] string $secret)
    {
        if ($secret === '') {
            throw new \InvalidArgumentException('the webhook secret is empty');
        }
        $key = $secret;
        if (str_starts_with($secret, 'whsec_')) {
            $key = base64_decode(substr($secret, strlen('whsec_')), true);
            if ($key === false) {
                throw new \InvalidArgumentException('the whsec_ secret is not base64');
            }
        }
        $this->key = $key;
    }

    /**
     * Returns the event, decoded, when $body carries a valid signature in
     * $headers (names in any case); throws \UnexpectedValueException
     * otherwise. $body must be the raw body as received.
     */
    public function verify(string $body, array $headers, ?int $now = null): array
    {
        $h = array_change_key_case($headers, CASE_LOWER);
        $id = (string) ($h['webhook-id'] ?? '');
        $timestamp = (string) ($h['webhook-timestamp'] ?? '');
        $signatures = (string) ($h['webhook-signature'] ?? '');
        if ($id === '' || $timestamp === '' || $signatures === '') {
            throw new \UnexpectedValueException('missing webhook-id, webhook-timestamp or webhook-signature');
        }
        if (!ctype_digit($timestamp) || abs(($now ?? time()) - (int) $timestamp) > self::TOLERANCE_SECONDS) {
            throw new \UnexpectedValueException('webhook-timestamp is outside the tolerance');
        }
        $expected = base64_encode(hash_hmac('sha256', "$id.$timestamp.$body", $this->key, true));
        foreach (preg_split('/ +/', trim($signatures)) as $versioned) {
            [$version, $signature] = array_pad(explode(',', $versioned, 2), 2, '');
            if ($version === 'v1' && hash_equals($expected, $signature)) {
                $event = json_decode($body, true);
                if (!is_array($event)) {
                    throw new \UnexpectedValueException('the body is not a JSON object');
                }
                return $event;
            }
        }
        throw new \UnexpectedValueException('no valid signature');
    }
}
