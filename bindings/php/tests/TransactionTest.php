<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\CommandException;

final class TransactionTest extends TestCase
{
    public function testCommitMakesWritesVisible(): void
    {
        $session = $this->client->startSession();
        $session->startTransaction(['writeConcern' => ['w' => 'majority'], 'maxCommitTimeMS' => 5000]);
        $this->coll->insertOne(['_id' => 1], ['session' => $session]);
        $this->coll->insertOne(['_id' => 2], ['session' => $session]);
        $this->assertSame(2, $this->coll->countDocuments([], ['session' => $session]));
        $session->commitTransaction();
        $session->endSession();
        $this->assertSame(2, $this->coll->countDocuments());
    }

    public function testAbortDiscardsWrites(): void
    {
        $this->coll->insertOne(['_id' => 'before']);
        $session = $this->client->startSession();
        $session->startTransaction();
        $this->coll->insertOne(['_id' => 'inside'], ['session' => $session]);
        $session->abortTransaction();
        $this->assertSame(['before'], array_column($this->coll->find()->toArray(), '_id'));
    }

    public function testEndingASessionAbortsItsOpenTransaction(): void
    {
        $this->coll->insertOne(['_id' => 'setup']);
        $session = $this->client->startSession();
        $session->startTransaction();
        $this->coll->insertOne(['_id' => 'dropped'], ['session' => $session]);
        unset($session); // the destructor ends it
        $this->assertSame(0, $this->coll->countDocuments(['_id' => 'dropped']));
    }

    public function testSessionIdIsADocument(): void
    {
        $this->assertSame(['id'], array_keys($this->client->startSession()->getSessionId()));
    }

    public function testTransientErrorCarriesItsLabel(): void
    {
        $this->coll->insertOne(['_id' => 'setup']);
        $this->failPoint(['times' => 1], ['failCommands' => ['insert'], 'errorCode' => 112, 'errorLabels' => ['TransientTransactionError']]);
        $session = $this->client->startSession();
        $session->startTransaction();
        try {
            $this->coll->insertOne(['_id' => 'x'], ['session' => $session]);
            $this->fail('the fail point did not fire');
        } catch (CommandException $e) {
            $this->assertTrue($e->hasErrorLabel('TransientTransactionError'));
        }
        $session->abortTransaction();
    }
}
