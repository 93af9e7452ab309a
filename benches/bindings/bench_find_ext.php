<?php
// benches/tools/bench_find.rs's protocol through the official `mongodb`
// extension (Debian's php-mongodb, on libmongoc), as a script uses it
// without the mongodb/mongodb library: Manager and Query.
declare(strict_types=1);

require __DIR__ . '/common.php';

[$mode, $uri, $db, $coll, $arg] = array_slice($argv, 1) + [null, null, null, null, null];
bench_connecting();
$manager = new MongoDB\Driver\Manager($uri);
$namespace = "$db.$coll";
$findOne = static function (int $id) use ($manager, $namespace): ?array {
    $cursor = $manager->executeQuery($namespace, new MongoDB\Driver\Query(['_id' => $id], ['limit' => 1]));
    $cursor->setTypeMap(['root' => 'array', 'document' => 'array', 'array' => 'array']);
    return $cursor->toArray()[0] ?? null;
};
run_bench_find($mode, $arg, $findOne);
