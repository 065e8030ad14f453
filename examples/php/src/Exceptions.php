<?php

declare(strict_types=1);

namespace Settle\Example;

/** The job is not done yet: deliver it again after its backoff (Laravel's release()). */
final class RetryLater extends \RuntimeException
{
}

/** The job cannot succeed by retrying (Laravel's fail()). */
final class JobFailed extends \RuntimeException
{
}
