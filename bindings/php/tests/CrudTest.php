<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\Binary;
use MongoInline\ObjectId;
use MongoInline\UTCDateTime;

final class CrudTest extends TestCase
{
    public function testInsertAndFindOneRoundTripTypes(): void
    {
        $document = [
            '_id' => new ObjectId(),
            'name' => 'Ada',
            'born' => UTCDateTime::fromDateTime(new \DateTimeImmutable('1815-12-10T12:30:00.250Z')),
            'big' => 2 ** 40,
            'small' => -7,
            'price' => 9.99,
            'blob' => new Binary("\x00\x01\x02", 0x80),
            'tags' => ['math', ['nested' => true]],
            'empty' => [],
            'object' => new \stdClass(),
            'nothing' => null,
        ];
        $result = $this->coll->insertOne($document);
        $this->assertEquals($document['_id'], $result['insertedId']);
        $found = $this->coll->findOne(['_id' => $document['_id']]);
        $document['object'] = []; // an empty document decodes as an empty array
        $this->assertEquals($document, $found);
        $this->assertSame(2 ** 40, $found['big']);
        $this->assertSame('1815-12-10 12:30:00.250', $found['born']->toDateTime()->format('Y-m-d H:i:s.v'));
    }

    public function testInsertOneGeneratesAnId(): void
    {
        $result = $this->coll->insertOne(['x' => 1]);
        $this->assertInstanceOf(ObjectId::class, $result['insertedId']);
        $this->assertSame(1, $this->coll->findOne(['_id' => $result['insertedId']])['x']);
    }

    public function testInsertManyAndCount(): void
    {
        $result = $this->coll->insertMany([['i' => 0], ['i' => 1], ['i' => 2], ['i' => 3], ['i' => 4]]);
        $this->assertCount(5, $result['insertedIds']);
        $this->assertSame(5, $this->coll->countDocuments());
        $this->assertSame(2, $this->coll->countDocuments(['i' => ['$gte' => 3]]));
        $this->assertSame(2, $this->coll->countDocuments([], ['limit' => 2]));
        $this->assertSame(1, $this->coll->countDocuments([], ['skip' => 4]));
    }

    public function testUpdateOneManyAndUpsert(): void
    {
        $this->coll->insertMany([['k' => 'a', 'n' => 0], ['k' => 'a', 'n' => 0], ['k' => 'b', 'n' => 0]]);
        $one = $this->coll->updateOne(['k' => 'a'], ['$inc' => ['n' => 1]]);
        $this->assertSame([1, 1], [$one['matchedCount'], $one['modifiedCount']]);
        $many = $this->coll->updateMany(['k' => 'a'], ['$set' => ['seen' => true]]);
        $this->assertSame([2, 2], [$many['matchedCount'], $many['modifiedCount']]);
        $upserted = $this->coll->updateOne(['k' => 'c'], ['$set' => ['n' => 9]], ['upsert' => true]);
        $this->assertArrayHasKey('upsertedId', $upserted);
        $this->assertSame(9, $this->coll->findOne(['k' => 'c'])['n']);
    }

    public function testDeleteOneAndMany(): void
    {
        $this->coll->insertMany([['k' => 1], ['k' => 1], ['k' => 2]]);
        $this->assertSame(1, $this->coll->deleteOne(['k' => 1])['deletedCount']);
        $this->assertSame(2, $this->coll->deleteMany([])['deletedCount']);
        $this->assertNull($this->coll->findOne());
    }

    public function testFindOptionsAndAggregate(): void
    {
        $this->coll->insertMany(array_map(static fn ($i) => ['_id' => $i, 'even' => $i % 2 === 0], range(0, 5)));
        $found = $this->coll->find(['even' => true], ['sort' => ['_id' => -1], 'projection' => ['even' => 0], 'skip' => 1])->toArray();
        $this->assertSame([['_id' => 2], ['_id' => 0]], $found);
        $grouped = $this->coll->aggregate([
            ['$group' => ['_id' => '$even', 'n' => ['$sum' => 1]]],
            ['$sort' => ['_id' => 1]],
        ])->toArray();
        $this->assertSame([['_id' => false, 'n' => 3], ['_id' => true, 'n' => 3]], $grouped);
    }

    public function testCommandReplyIsAnArray(): void
    {
        $this->assertEquals(1.0, $this->client->selectDatabase('admin')->command(['ping' => 1])['ok']);
    }
}
