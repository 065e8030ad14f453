<?php

declare(strict_types=1);

namespace Settle\Example;

/** An error answer of Settle's: the google.rpc.Status code, the HTTP status and the message. */
final class SettleError extends \RuntimeException
{
    // The gRPC codes a client acts on (google.rpc.Code).
    public const UNKNOWN = 2;
    public const INVALID_ARGUMENT = 3;
    public const DEADLINE_EXCEEDED = 4;
    public const NOT_FOUND = 5;
    public const ALREADY_EXISTS = 6;
    public const RESOURCE_EXHAUSTED = 8;
    public const FAILED_PRECONDITION = 9;
    public const ABORTED = 10;
    public const UNAVAILABLE = 14;

    public function __construct(public readonly int $grpcCode, public readonly int $httpStatus, string $message)
    {
        parent::__construct($message);
    }

    /** Whether the same call, under the same request id, may succeed later. */
    public function retryable(): bool
    {
        return in_array($this->grpcCode, [self::UNAVAILABLE, self::DEADLINE_EXCEEDED, self::RESOURCE_EXHAUSTED, self::ABORTED], true);
    }
}
