<?php
// A short run through every kind of handle and error, for valgrind
// (.ci/bindings runs it with USE_ZEND_ALLOC=0). Usage: php leak_check.php URI
declare(strict_types=1);

require __DIR__ . '/autoload.php';

use MongoInline\Client;
use MongoInline\InvalidDocumentException;
use MongoInline\LogicException;
use MongoInline\WriteException;

$client = new Client($argv[1]);
$coll = $client->selectCollection('leak', 'check');
$coll->deleteMany([]);
$coll->insertMany(array_map(static fn ($i) => ['_id' => $i], range(0, 4)));
$ids = array_column($coll->find([], ['sort' => ['_id' => 1], 'batchSize' => 2])->toArray(), '_id');
assert($ids === range(0, 4)) || exit(1);
$early = $coll->find([], ['batchSize' => 1]);
$early->rewind();
$early->close();
$early->close();
try {
    $coll->insertOne(['_id' => 0]);
} catch (WriteException) {
}
try {
    $coll->insertOne(['v' => fopen('php://memory', 'r')]);
} catch (InvalidDocumentException) {
}
$session = $client->startSession();
$session->startTransaction();
$coll->updateOne(['_id' => 1], ['$set' => ['x' => 1]], ['session' => $session]);
$session->commitTransaction();
$session->startTransaction();
$coll->deleteOne(['_id' => 2], ['session' => $session]);
unset($session); // left open: ending the session aborts it
$session = $client->startSession();
$session->withTransaction(static fn ($s) => $coll->updateOne(['_id' => 3], ['$set' => ['y' => 1]], ['session' => $s]));
try {
    $session->withTransaction(static fn ($s) => $coll->insertOne(['_id' => 4], ['session' => $s]));
} catch (WriteException) {
    // the library's own error, handed back and thrown again
}
try {
    $session->withTransaction(static function (): void {
        throw new DomainException('callback');
    });
} catch (DomainException) {
}
$session->endSession();
if ($coll->countDocuments() !== 5) {
    exit(1);
}
$client->close();
$client->close();
try {
    $coll->findOne();
} catch (LogicException) {
}
echo "leak check: ok\n";
