<?php

declare(strict_types=1);

// A receiver of Settle's events for PHP's built-in server:
//
//   WEBHOOK_SECRET=whsec_... php -S 127.0.0.1:8099 receiver.php
//
// POST /events verifies the delivery (WebhookVerifier) and answers 200,
// or 400 for a bad signature, which Settle retries. Each delivery is
// logged as one JSON line on stderr.

require __DIR__ . '/autoload.php';

use Settle\Example\WebhookVerifier;

function logLine(string $msg, array $fields = []): void
{
    file_put_contents('php://stderr', json_encode(['msg' => $msg] + $fields, JSON_UNESCAPED_SLASHES) . "\n");
}

if ($_SERVER['REQUEST_METHOD'] !== 'POST' || parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH) !== '/events') {
    http_response_code(404);
    return;
}
$body = (string) file_get_contents('php://input');
$headers = [];
foreach ($_SERVER as $k => $v) {
    if (str_starts_with($k, 'HTTP_')) {
        $headers[str_replace('_', '-', strtolower(substr($k, 5)))] = $v;
    }
}
try {
    $event = (new WebhookVerifier((string) getenv('WEBHOOK_SECRET')))->verify($body, $headers);
} catch (\UnexpectedValueException $e) {
    logLine('rejected', ['webhook_id' => $headers['webhook-id'] ?? '', 'error' => $e->getMessage()]);
    http_response_code(400);
    echo "bad signature\n";
    return;
}
// A real receiver records webhook-id with what it did, in the same
// transaction, and answers a repeat 200 without doing it again.
logLine('event', ['webhook_id' => $headers['webhook-id'], 'type' => $event['type'] ?? '', 'order_id' => $event['order']['id'] ?? '', 'state' => $event['order']['state'] ?? '']);
http_response_code(200);
