<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\LogicException;

final class CursorTest extends TestCase
{
    public function testIteratesOverSeveralBatches(): void
    {
        $this->coll->insertMany(array_map(static fn ($i) => ['_id' => $i], range(0, 10)));
        $before = $this->getMores();
        $ids = [];
        foreach ($this->coll->find([], ['sort' => ['_id' => 1], 'batchSize' => 3]) as $document) {
            $ids[] = $document['_id'];
        }
        $this->assertSame(range(0, 10), $ids);
        $this->assertSame(3, $this->getMores() - $before, '11 documents in batches of 3: find + 3 getMores');
    }

    public function testClosedTwiceAndUsedAfterClose(): void
    {
        $this->coll->insertMany([['a' => 1], ['a' => 2], ['a' => 3]]);
        $cursor = $this->coll->find([], ['batchSize' => 1]);
        $cursor->rewind();
        $this->assertTrue($cursor->valid());
        $cursor->close();
        $cursor->close();
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage('cursor is closed');
        $cursor->next();
    }

    public function testIteratesOnceAndStaysExhausted(): void
    {
        $this->coll->insertMany([['a' => 1], ['a' => 2]]);
        $cursor = $this->coll->find([], ['sort' => ['a' => 1]]);
        $this->assertSame([1, 2], array_column(iterator_to_array($cursor, false), 'a'));
        $cursor->next();
        $this->assertFalse($cursor->valid());
        $this->expectException(LogicException::class);
        $cursor->rewind();
    }

    private function getMores(): int
    {
        $status = $this->client->selectDatabase('admin')->command(['serverStatus' => 1]);
        return (int) ($status['opcounters']['getmore'] ?? 0);
    }
}
