<?php
// benches/tools/bench_find.rs's protocol through bindings/php (FFI):
//   php bench_find.php cold URI DB COLL ID   -> DOC {json}
//   php bench_find.php warm URI DB COLL N    -> ops_per_s=... cpu_us_per_op=...
declare(strict_types=1);

require __DIR__ . '/common.php';
require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

[$mode, $uri, $db, $coll, $arg] = array_slice($argv, 1) + [null, null, null, null, null];
bench_connecting();
$collection = (new MongoInline\Client($uri))->selectCollection($db, $coll);
$findOne = static fn (int $id) => $collection->findOne(['_id' => $id]);
run_bench_find($mode, $arg, $findOne);
