<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\InvalidArgumentException;
use MongoInline\TimeoutException;

/**
 * Per-operation timeoutMS through the C ABI: each operation here is blocked
 * by the server for 2 s (failCommand's blockConnection), so only its own
 * timeoutMS of 100 ms can end it sooner, with a TimeoutException.
 */
final class TimeoutTest extends TestCase
{
    private function blockNext(string $command): void
    {
        $this->failPoint(['times' => 1], ['failCommands' => [$command], 'blockConnection' => true, 'blockTimeMS' => 2000]);
    }

    private function assertTimesOut(callable $operation): void
    {
        $started = hrtime(true);
        try {
            $operation();
            $this->fail('expected a TimeoutException');
        } catch (TimeoutException $e) {
            $took = (hrtime(true) - $started) / 1e6;
            $this->assertGreaterThanOrEqual(90, $took, $e->getMessage());
            $this->assertLessThan(1500, $took, $e->getMessage());
        }
    }

    public function testReadsWritesAndCursorsTimeOut(): void
    {
        $this->coll->insertOne(['x' => 1]);
        $this->blockNext('find');
        $this->assertTimesOut(fn () => $this->coll->findOne([], ['timeoutMS' => 100]));
        $this->blockNext('insert');
        $this->assertTimesOut(fn () => $this->coll->insertOne(['x' => 2], ['timeoutMS' => 100]));
        $this->blockNext('delete');
        $this->assertTimesOut(fn () => $this->coll->deleteMany([], ['timeoutMS' => 100]));
        $this->blockNext('aggregate');
        $this->assertTimesOut(fn () => $this->coll->aggregate([], ['timeoutMS' => 100, 'timeoutMode' => 'cursorLifetime']));
        $this->blockNext('findAndModify');
        $this->assertTimesOut(fn () => $this->coll->findOneAndDelete(['x' => 1], ['timeoutMS' => 100]));
        $this->assertSame(1, $this->coll->countDocuments(['x' => 1]));
    }

    public function testTransactionsAndCommitsTimeOut(): void
    {
        $this->coll->insertOne(['before' => true]);
        $session = $this->client->startSession();
        $this->blockNext('insert');
        $this->assertTimesOut(fn () => $session->withTransaction(
            fn ($s) => $this->coll->insertOne(['in' => 'txn'], ['session' => $s]),
            ['timeoutMS' => 100]
        ));
        $session->startTransaction();
        $this->coll->insertOne(['in' => 'committed txn'], ['session' => $session]);
        $this->blockNext('commitTransaction');
        $this->assertTimesOut(fn () => $session->commitTransaction(['timeoutMS' => 100]));
        $session->endSession();
    }

    public function testTimeoutOptionsAreChecked(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessage("unknown option 'timeoutMode'");
        $this->coll->insertOne(['x' => 1], ['timeoutMode' => 'iteration']);
    }
}
