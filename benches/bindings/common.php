<?php
// The modes both PHP bench_find scripts share. Required first: the time
// to the first result counts from here, the driver's loading included.
declare(strict_types=1);

$GLOBALS['bench_start'] = hrtime(true);

/** Marks the start of connecting: round trips are counted from here. */
function bench_connecting(): void
{
    $GLOBALS['bench_connect'] = hrtime(true);
}

function run_bench_find(?string $mode, ?string $arg, callable $findOne): void
{
    if ($mode === 'cold') {
        $document = $findOne((int) $arg);
        $now = hrtime(true);
        printf("FIRST_MS %.3f\nCONNECTED_MS %.3f\n", ($now - $GLOBALS['bench_start']) / 1e6, ($now - $GLOBALS['bench_connect']) / 1e6);
        echo 'DOC ', json_encode($document), "\n";
        return;
    }
    if ($mode !== 'warm') {
        fwrite(STDERR, "usage: cold|warm URI DB COLL ID|N\n");
        exit(2);
    }
    $ops = (int) $arg;
    $findOne(1); // connected and warm
    $cpu = static function (): float {
        $usage = getrusage();
        return $usage['ru_utime.tv_sec'] * 1e6 + $usage['ru_utime.tv_usec'] + $usage['ru_stime.tv_sec'] * 1e6 + $usage['ru_stime.tv_usec'];
    };
    $cpuStart = $cpu();
    $start = hrtime(true);
    for ($i = 0; $i < $ops; $i++) {
        if ($findOne(1) === null) {
            fwrite(STDERR, "find_one found nothing\n");
            exit(1);
        }
    }
    $seconds = (hrtime(true) - $start) / 1e9;
    printf("ops_per_s=%.0f cpu_us_per_op=%.2f\n", $ops / $seconds, ($cpu() - $cpuStart) / $ops);
}
