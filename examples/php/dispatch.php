<?php

declare(strict_types=1);

// The checkout's side: ChargeOrderJob::dispatch() makes the job, and with
// it the charge's request id, and queues it.
//
//   php dispatch.php <merchant_reference> <amount_minor> <currency> <payment_method>
//
// prints {"job": ..., "request_id": ...}. Environment: QUEUE_DIR.

require __DIR__ . '/autoload.php';

use Settle\Example\ChargeOrderJob;
use Settle\Example\FileQueue;

if ($argc !== 5) {
    fwrite(STDERR, "usage: php dispatch.php <merchant_reference> <amount_minor> <currency> <payment_method>\n");
    exit(2);
}
$queue = new FileQueue(getenv('QUEUE_DIR') ?: __DIR__ . '/queue');
$job = ChargeOrderJob::dispatch($queue, $argv[1], (int) $argv[2], $argv[3], $argv[4]);
echo json_encode(['merchant_reference' => $job->merchantReference, 'request_id' => $job->requestId]), "\n";
