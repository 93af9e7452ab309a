<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\LogicException;
use MongoInline\Session;

/** withTransaction over the C ABI's retry loop (mi_session_with_transaction). */
final class WithTransactionTest extends TestCase
{
    public function testRetriesATransientError(): void
    {
        $this->coll->insertOne(['_id' => 'setup']);
        $calls = 0;
        $this->failPoint(['times' => 1], ['failCommands' => ['insert'], 'errorCode' => 112, 'errorLabels' => ['TransientTransactionError']]);
        $session = $this->client->startSession();
        $result = $session->withTransaction(function (Session $s) use (&$calls) {
            $calls++;
            $this->coll->insertOne(['_id' => $calls], ['session' => $s]);
            return 'done';
        });
        $this->assertSame('done', $result);
        $this->assertSame(2, $calls);
        $this->assertSame(1, $this->coll->countDocuments(['_id' => ['$ne' => 'setup']]));
    }

    public function testRetriesAnUnknownCommitResult(): void
    {
        $this->coll->insertOne(['_id' => 'setup']);
        $this->failPoint(['times' => 1], ['failCommands' => ['commitTransaction'], 'errorCode' => 91, 'errorLabels' => ['UnknownTransactionCommitResult']]);
        $this->client->startSession()->withTransaction(fn (Session $s) => $this->coll->insertOne(['_id' => 'once'], ['session' => $s]));
        $this->assertSame(1, $this->coll->countDocuments(['_id' => 'once']));
    }

    public function testAThrowableInTheCallbackAbortsAndIsThrownAgain(): void
    {
        $this->coll->insertOne(['_id' => 'setup']);
        $session = $this->client->startSession();
        try {
            $session->withTransaction(function (Session $s): void {
                $this->coll->insertOne(['_id' => 'never'], ['session' => $s]);
                throw new \DomainException('the script changed its mind');
            });
            $this->fail('the exception was lost');
        } catch (\DomainException $e) {
            $this->assertSame('the script changed its mind', $e->getMessage());
        }
        $session->startTransaction(); // the session is usable: the transaction was aborted
        $session->abortTransaction();
        $this->assertSame(0, $this->coll->countDocuments(['_id' => 'never']));
    }

    public function testEndingTheSessionInsideTheCallbackIsRefused(): void
    {
        $session = $this->client->startSession();
        $this->expectException(LogicException::class);
        $session->withTransaction(static fn (Session $s) => $s->endSession());
    }
}
