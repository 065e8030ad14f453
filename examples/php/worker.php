<?php

declare(strict_types=1);

// The queue's worker (php artisan queue:work, in miniature): reserves the
// next job from the file queue, runs ChargeOrderJob::handle(), and
// completes, releases (with the job's backoff) or fails it. Killed in the
// middle of a job, it leaves the job to the next worker.
//
// Environment: SETTLE_JSON_URL (settle dev's "json:" line, by default
// http://127.0.0.1:8091), SETTLE_KEY (a checkout key), QUEUE_DIR (default
// ./queue). Each step prints one JSON line.

require __DIR__ . '/autoload.php';

use Settle\Example\ChargeOrderJob;
use Settle\Example\FileQueue;
use Settle\Example\JobFailed;
use Settle\Example\RetryLater;
use Settle\Example\SettleClient;

function logLine(string $msg, array $fields = []): void
{
    echo json_encode(['msg' => $msg] + $fields, JSON_UNESCAPED_SLASHES), "\n";
}

$settle = new SettleClient(getenv('SETTLE_JSON_URL') ?: 'http://127.0.0.1:8091', getenv('SETTLE_KEY') ?: '');
$queue = new FileQueue(getenv('QUEUE_DIR') ?: __DIR__ . '/queue');

$stop = false;
pcntl_async_signals(true);
pcntl_signal(SIGTERM, static function () use (&$stop): void { $stop = true; });
pcntl_signal(SIGINT, static function () use (&$stop): void { $stop = true; });

logLine('ready', ['queue' => getenv('QUEUE_DIR') ?: __DIR__ . '/queue']);
while (!$stop) {
    $r = $queue->reserve();
    if ($r === null) {
        usleep(100_000);
        continue;
    }
    [$env, $job] = $r;
    $fields = ['job' => $env['id'], 'merchant_reference' => $job->merchantReference, 'delivery' => $env['attempts']];
    $log = static fn (string $msg, array $more = []) => logLine($msg, $fields + $more);
    try {
        $order = $job->handle($settle, $log);
        $queue->complete($r, ['order_id' => $order['id'], 'state' => $order['state']]);
        $log('completed', ['order_id' => $order['id'], 'state' => $order['state']]);
    } catch (RetryLater $e) {
        if ($env['attempts'] >= $job->tries) {
            $queue->fail($r, $e->getMessage());
            $log('failed', ['error' => $e->getMessage()]);
            continue;
        }
        $queue->release($r, $job->backoff($env['attempts']));
        $log('released', ['error' => $e->getMessage()]);
    } catch (JobFailed $e) {
        $queue->fail($r, $e->getMessage());
        $log('failed', ['error' => $e->getMessage()]);
    } catch (\Throwable $e) {
        // A bug or a broken answer: retry, as Laravel does, until $tries.
        $queue->release($r, $job->backoff($env['attempts']));
        $log('released', ['error' => get_class($e) . ': ' . $e->getMessage()]);
    }
}
