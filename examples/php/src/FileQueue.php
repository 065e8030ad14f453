<?php

declare(strict_types=1);

namespace Settle\Example;

/**
 * A tiny queue in a directory, for the example's worker: at-least-once,
 * like Laravel's queues. A job is a file: ready/<due ms>-<id>.job until a
 * worker reserves it, reserved/<id>.job while the worker holds an
 * exclusive flock on it, then done/<id>.json or failed/<id>.json. The
 * kernel drops a dead worker's lock, so a worker killed mid-job leaves a
 * reserved file that nobody holds, and the next reserve() takes that job
 * again: the job runs twice, which is what ChargeOrderJob is made for.
 */
final class FileQueue
{
    public function __construct(private readonly string $dir)
    {
        foreach (['ready', 'reserved', 'done', 'failed'] as $d) {
            if (!is_dir("$dir/$d") && !mkdir("$dir/$d", 0700, true) && !is_dir("$dir/$d")) {
                throw new \RuntimeException("cannot make $dir/$d");
            }
        }
    }

    /** Queues $job, due now; returns the queue's id of it. */
    public function push(ChargeOrderJob $job): string
    {
        $id = bin2hex(random_bytes(8));
        $this->write($this->readyPath($id, 0.0), ['id' => $id, 'attempts' => 0, 'job' => base64_encode(serialize($job))]);
        return $id;
    }

    /**
     * Reserves the next due job, a dead worker's first: [envelope, job,
     * handle], the handle holding the job's lock until complete(),
     * release() or fail(); null when no job is due.
     */
    public function reserve(): ?array
    {
        $now = microtime(true);
        $candidates = array_merge(glob("$this->dir/reserved/*.job") ?: [], glob("$this->dir/ready/*.job") ?: []);
        foreach ($candidates as $path) {
            if (str_contains($path, '/ready/') && (int) strtok(basename($path), '-') > (int) ($now * 1000)) {
                continue; // not due yet
            }
            $fh = @fopen($path, 'r+');
            if ($fh === false) {
                continue; // taken meanwhile
            }
            // The lock is taken before the file moves, and moves with it:
            // a reserved job is locked for as long as its worker lives.
            if (!flock($fh, LOCK_EX | LOCK_NB) || !$this->same($fh, $path)) {
                fclose($fh);
                continue;
            }
            $env = json_decode((string) stream_get_contents($fh), true);
            if (!is_array($env)) {
                fclose($fh);
                continue;
            }
            $reserved = "$this->dir/reserved/{$env['id']}.job";
            if ($path !== $reserved && !rename($path, $reserved)) {
                fclose($fh);
                continue;
            }
            $env['attempts']++;
            ftruncate($fh, 0);
            rewind($fh);
            fwrite($fh, json_encode($env, JSON_THROW_ON_ERROR));
            fflush($fh);
            $job = unserialize(base64_decode($env['job']), ['allowed_classes' => [ChargeOrderJob::class]]);
            if (!$job instanceof ChargeOrderJob) {
                $this->fail([$env, null, $fh], 'the payload is not a ChargeOrderJob');
                continue;
            }
            return [$env, $job, $fh];
        }
        return null;
    }

    /** The job is done: $result is kept in done/. */
    public function complete(array $r, array $result): void
    {
        $this->finish($r, "$this->dir/done/{$r[0]['id']}.json", $result + ['attempts' => $r[0]['attempts']]);
    }

    /** The job is failed for good: $why is kept in failed/. */
    public function fail(array $r, string $why): void
    {
        $this->finish($r, "$this->dir/failed/{$r[0]['id']}.json", ['error' => $why, 'attempts' => $r[0]['attempts']]);
    }

    /** Puts the job back, due in $delay seconds. */
    public function release(array $r, float $delay): void
    {
        [$env, , $fh] = $r;
        $this->write($this->readyPath($env['id'], microtime(true) + $delay), $env);
        unlink("$this->dir/reserved/{$env['id']}.job");
        flock($fh, LOCK_UN);
        fclose($fh);
    }

    private function finish(array $r, string $path, array $record): void
    {
        [$env, , $fh] = $r;
        $this->write($path, $record);
        unlink("$this->dir/reserved/{$env['id']}.job");
        flock($fh, LOCK_UN);
        fclose($fh);
    }

    private function readyPath(string $id, float $due): string
    {
        return sprintf('%s/ready/%013d-%s.job', $this->dir, (int) ($due * 1000), $id);
    }

    /** Writes $data whole or not at all: a temp file, then a rename. */
    private function write(string $path, array $data): void
    {
        $tmp = "$this->dir/.tmp-" . bin2hex(random_bytes(6));
        file_put_contents($tmp, json_encode($data, JSON_THROW_ON_ERROR));
        rename($tmp, $path);
    }

    /** Whether the open file is still the one at $path (not moved away meanwhile). */
    private function same($fh, string $path): bool
    {
        clearstatcache(true, $path);
        $at = @stat($path);
        return $at !== false && fstat($fh)['ino'] === $at['ino'];
    }
}
