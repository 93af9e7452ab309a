<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\Client;
use MongoInline\CommandException;
use MongoInline\InvalidArgumentException;
use MongoInline\LogicException;
use MongoInline\ServerSelectionException;
use MongoInline\WriteException;

final class ErrorTest extends TestCase
{
    public function testDuplicateKeyIsAWriteExceptionWithItsCode(): void
    {
        $this->coll->insertOne(['_id' => 7]);
        try {
            $this->coll->insertOne(['_id' => 7]);
            $this->fail('a duplicate key was accepted');
        } catch (WriteException $e) {
            $this->assertSame(11000, $e->getCode());
            $this->assertStringContainsStringIgnoringCase('duplicate key', $e->getMessage());
        }
    }

    public function testServerErrorCarriesItsLabels(): void
    {
        $this->failPoint(['times' => 1], ['failCommands' => ['insert'], 'errorCode' => 2, 'errorLabels' => ['PhpTestLabel', 'OtherLabel']]);
        try {
            $this->coll->insertOne(['x' => 1]);
            $this->fail('the fail point did not fire');
        } catch (CommandException $e) {
            $this->assertSame(2, $e->getCode());
            $labels = $e->getErrorLabels();
            sort($labels);
            $this->assertSame(['OtherLabel', 'PhpTestLabel'], $labels);
            $this->assertTrue($e->hasErrorLabel('PhpTestLabel'));
            $this->assertFalse($e->hasErrorLabel('RetryableWriteError'));
        }
    }

    public function testARetryableErrorIsRetriedOnce(): void
    {
        $this->failPoint(['times' => 1], ['failCommands' => ['insert'], 'errorCode' => 91, 'errorLabels' => ['RetryableWriteError']]);
        $this->coll->insertOne(['_id' => 'retried']);
        $this->assertSame(1, $this->coll->countDocuments(['_id' => 'retried']));
    }

    public function testBadUriNamesTheProblem(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessageMatches('/port/');
        new Client('mongodb://host:notaport/');
    }

    public function testInvalidCollectionNameIsRefusedBeforeSending(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->client->selectCollection('phpunit', 'bad$name')->insertOne(['x' => 1]);
    }

    public function testUnknownOptionIsRefused(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessage("unknown option 'maxTimeMs'");
        $this->coll->find([], ['maxTimeMs' => 5]);
    }

    public function testUnknownCommandIsACommandException(): void
    {
        $this->expectException(CommandException::class);
        $this->expectExceptionCode(59);
        $this->client->selectDatabase('admin')->command(['noSuchCommandAnywhere' => 1]);
    }

    public function testCommitWithoutTransactionIsALogicException(): void
    {
        $session = $this->client->startSession();
        $this->expectException(LogicException::class);
        $session->commitTransaction();
    }

    public function testUnreachableServerIsAServerSelectionException(): void
    {
        $probe = stream_socket_server('tcp://127.0.0.1:0');
        $port = (int) substr(strrchr(stream_socket_get_name($probe, false), ':'), 1);
        fclose($probe);
        $client = new Client("mongodb://127.0.0.1:$port/?serverSelectionTimeoutMS=100&connectTimeoutMS=100");
        $this->expectException(ServerSelectionException::class);
        $client->selectDatabase('admin')->command(['ping' => 1]);
    }
}
