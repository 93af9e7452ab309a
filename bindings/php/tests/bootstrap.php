<?php
// One SecantusDB (a one-member replica set, in memory) for the whole run,
// from SECANTUSD (set by .ci/install-server); killed by its PID at exit.
declare(strict_types=1);

require dirname(__DIR__) . '/autoload.php';
require __DIR__ . '/TestCase.php';

(static function (): void {
    $binary = getenv('SECANTUSD');
    if (!is_string($binary) || $binary === '') {
        fwrite(STDERR, "SECANTUSD is not set: the path of SecantusDB's secantusd-py\n");
        exit(1);
    }
    $probe = stream_socket_server('tcp://127.0.0.1:0');
    $port = (int) substr(strrchr(stream_socket_get_name($probe, false), ':'), 1);
    fclose($probe);
    $log = sys_get_temp_dir() . "/mongo-inline-phpunit-$port.log";
    $process = proc_open(
        [$binary, '--host', '127.0.0.1', '--port', (string) $port, '--storage-path', ':memory:', '--enable-test-commands'],
        [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'w'], 2 => ['file', $log, 'w']],
        $pipes
    );
    $pid = proc_get_status($process)['pid'];
    $parent = getmypid();
    register_shutdown_function(static function () use ($process, $pid, $parent, $log): void {
        if (getmypid() === $parent) { // not in a forked child
            posix_kill($pid, SIGKILL);
            proc_close($process);
            @unlink($log);
        }
    });
    $deadline = microtime(true) + 20;
    while (!($socket = @fsockopen('127.0.0.1', $port, $errno, $errstr, 0.2))) {
        if (microtime(true) > $deadline || !proc_get_status($process)['running']) {
            fwrite(STDERR, "SecantusDB did not start on port $port (see $log)\n");
            exit(1);
        }
        usleep(50000);
    }
    fclose($socket);
    define('MONGO_URI', "mongodb://127.0.0.1:$port/?replicaSet=secantus");
})();
