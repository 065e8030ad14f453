<?php

declare(strict_types=1);

// The example's classes, without Composer: Settle\Example\X is src/X.php
// (RetryLater and JobFailed live in src/Exceptions.php).
spl_autoload_register(static function (string $class): void {
    $prefix = 'Settle\\Example\\';
    if (!str_starts_with($class, $prefix)) {
        return;
    }
    $name = substr($class, strlen($prefix));
    $file = __DIR__ . '/src/' . (in_array($name, ['RetryLater', 'JobFailed'], true) ? 'Exceptions' : $name) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
