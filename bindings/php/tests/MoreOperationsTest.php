<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\CommandException;
use MongoInline\InvalidArgumentException;
use MongoInline\WriteException;

/** The operations beyond CRUD: each through its C ABI function. */
final class MoreOperationsTest extends TestCase
{
    public function testReplaceAndFindOneAndModify(): void
    {
        $this->coll->insertMany([['_id' => 1, 'n' => 1], ['_id' => 2, 'n' => 2]]);
        $this->assertSame(1, $this->coll->replaceOne(['_id' => 1], ['n' => 10])['modifiedCount']);
        $this->assertSame(['_id' => 2, 'n' => 2], $this->coll->findOneAndUpdate(['_id' => 2], ['$inc' => ['n' => 1]]));
        $this->assertSame(['_id' => 2, 'n' => 4], $this->coll->findOneAndUpdate(['_id' => 2], ['$inc' => ['n' => 1]], ['returnDocument' => 'after']));
        $this->assertSame(['_id' => 1, 'n' => 10], $this->coll->findOneAndReplace(['_id' => 1], ['n' => 11]));
        $this->assertSame(['_id' => 1, 'n' => 11], $this->coll->findOneAndDelete(['_id' => 1]));
        $this->assertNull($this->coll->findOneAndDelete(['_id' => 'none']));
    }

    public function testDistinctCountsAndBulkWrite(): void
    {
        $result = $this->coll->bulkWrite([
            ['insertOne' => ['document' => ['_id' => 1, 'k' => 'a']]],
            ['insertOne' => ['document' => ['_id' => 2, 'k' => 'b']]],
            ['updateOne' => ['filter' => ['_id' => 2], 'update' => ['$set' => ['k' => 'a']]]],
            ['deleteOne' => ['filter' => ['_id' => 9]]],
        ]);
        $this->assertSame([2, 1, 0], [$result['insertedCount'], $result['modifiedCount'], $result['deletedCount']]);
        $this->assertSame(['a'], $this->coll->distinct('k'));
        $this->assertSame(2, $this->coll->estimatedDocumentCount());
    }

    public function testClientBulkWriteAcrossCollections(): void
    {
        $a = 'phpunit.' . $this->coll->name;
        $b = $a . '_b';
        $result = $this->client->bulkWrite([
            ['insertOne' => ['namespace' => $a, 'document' => ['_id' => 1]]],
            ['insertOne' => ['namespace' => $b, 'document' => ['_id' => 1]]],
            ['updateOne' => ['namespace' => $a, 'filter' => ['_id' => 1], 'update' => ['$set' => ['x' => 1]]]],
        ], ['verboseResults' => true]);
        $this->assertSame([2, 1], [$result['insertedCount'], $result['modifiedCount']]);
        $this->assertSame(['insertedId' => 1], $result['insertResults'][1]);
        $this->assertSame(['_id' => 1, 'x' => 1], $this->coll->findOne(['_id' => 1]));
        try {
            $this->client->bulkWrite([
                ['insertOne' => ['namespace' => $b, 'document' => ['_id' => 2]]],
                ['insertOne' => ['namespace' => $a, 'document' => ['_id' => 1]]],
            ]);
            $this->fail('a duplicate key must fail the bulk write');
        } catch (WriteException $e) {
            $this->assertSame(11000, $e->getCode());
            $this->assertSame(11000, $e->getDetails()['writeErrors'][1]['code']);
            $this->assertSame(1, $e->getDetails()['partialResult']['insertedCount']);
        }
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessage('namespace');
        $this->client->bulkWrite([['insertOne' => ['document' => []]]]);
    }

    public function testIndexes(): void
    {
        $this->coll->insertOne(['x' => 1]);
        $this->assertSame('x_1', $this->coll->createIndex(['x' => 1], ['name' => 'x_1', 'unique' => true]));
        $names = $this->coll->listIndexNames();
        sort($names);
        $this->assertSame(['_id_', 'x_1'], $names);
        $this->assertCount(2, $this->coll->listIndexes()->toArray());
        $this->coll->dropIndex('x_1');
        $this->assertSame(['_id_'], $this->coll->listIndexNames());
        $this->coll->createIndexes([['key' => ['y' => 1]], ['key' => ['z' => -1]]]);
        $this->coll->dropIndexes();
        $this->assertSame(['_id_'], $this->coll->listIndexNames());
    }

    public function testCollectionsAndDatabases(): void
    {
        $db = $this->client->selectDatabase('phpunit_listing');
        $db->drop();
        $capped = $db->createCollection('capped', ['capped' => true, 'size' => 4096]);
        $capped->insertOne(['x' => 1]);
        $this->assertSame(['capped'], $db->listCollectionNames());
        $this->assertSame(['capped'], array_column($db->listCollections()->toArray(), 'name'));
        $this->assertContains('phpunit_listing', $this->client->listDatabaseNames());
        $this->assertContains('phpunit_listing', array_column($this->client->listDatabases(), 'name'));
        $this->assertSame([['a' => 1]], $db->aggregate([['$documents' => [['a' => 1]]]])->toArray());
        $capped->drop();
        $this->assertSame([], $db->listCollectionNames());
        $this->client->dropDatabase('phpunit_listing');
    }

    public function testAnUnknownOptionNamesItself(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessageMatches('/maxTimeMs/');
        $this->coll->findOneAndDelete([], ['maxTimeMs' => 5]);
    }

    public function testDroppingAMissingIndexIsACommandException(): void
    {
        $this->coll->insertOne([]);
        $this->expectException(CommandException::class);
        $this->coll->dropIndex('nope_1');
    }

    public function testSearchIndexesAreRefusedByAServerWithoutAtlasSearch(): void
    {
        // SecantusDB answers every search-index command as a MongoDB without
        // Atlas Search does: ok 0, code 115 (CommandNotSupported).
        $this->coll->insertOne(['x' => 1]);
        $definition = ['mappings' => ['dynamic' => true]];
        $calls = [
            fn () => $this->coll->createSearchIndex($definition, ['name' => 's1', 'type' => 'search']),
            fn () => $this->coll->createSearchIndexes([['definition' => $definition, 'name' => 's1'], ['definition' => $definition, 'name' => 's2']]),
            fn () => $this->coll->updateSearchIndex('s1', ['mappings' => ['dynamic' => false]]),
            fn () => $this->coll->dropSearchIndex('s1'),
            fn () => iterator_to_array($this->coll->listSearchIndexes(['name' => 's1', 'batchSize' => 1])),
        ];
        foreach ($calls as $i => $call) {
            try {
                $call();
                $this->fail("call $i: expected a CommandException");
            } catch (CommandException $e) {
                $this->assertSame(115, $e->getCode(), "call $i: " . $e->getMessage());
            }
        }
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessage('unknown drop_search_index option "timeoutMS"');
        $this->coll->dropSearchIndex('s1', ['timeoutMS' => 100]);
    }
}
