<?php
// For use without Composer (Debian's phpunit, scripts): maps MongoInline\X to src/X.php.
spl_autoload_register(static function (string $class): void {
    $prefix = 'MongoInline\\';
    if (strncmp($class, $prefix, strlen($prefix)) === 0) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
