<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\Client;
use MongoInline\InvalidArgumentException;
use MongoInline\InvalidDocumentException;
use MongoInline\LogicException;

/** Bad input from a script is a PHP exception, never a crash. */
final class BadInputTest extends TestCase
{
    /** @return array<string, array{mixed}> */
    public static function valuesBsonCannotHold(): array
    {
        return [
            'resource' => [fopen('php://memory', 'r')],
            'closure' => [static fn () => 1],
            'other object' => [new \ArrayObject([1])],
            'invalid UTF-8' => ["\xff\xfe"],
        ];
    }

    /** @dataProvider valuesBsonCannotHold */
    public function testAValueBsonCannotHold(mixed $value): void
    {
        try {
            $this->coll->insertOne(['v' => $value]);
            $this->fail('the value was accepted');
        } catch (InvalidDocumentException $e) {
            $this->assertStringContainsString("'v'", $e->getMessage());
        }
        $this->assertSame(0, $this->coll->countDocuments());
    }

    public function testNestingTooDeep(): void
    {
        $document = [];
        for ($i = 0; $i < 150; $i++) {
            $document = ['d' => $document ?: ['x' => 1]];
        }
        $this->expectException(InvalidDocumentException::class);
        $this->coll->insertOne($document);
    }

    public function testABadDocumentInABatchInsertsNothing(): void
    {
        try {
            $this->coll->insertMany([['ok' => 1], ['bad' => fopen('php://memory', 'r')]]);
            $this->fail('the batch was accepted');
        } catch (InvalidDocumentException) {
        }
        $this->assertSame(0, $this->coll->countDocuments());
    }

    public function testNamesWithNulAreRefused(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->client->selectCollection('phpunit', "a\0b");
    }

    public function testClientClosedTwiceAndUsedAfterClose(): void
    {
        $client = new Client(MONGO_URI);
        $coll = $client->selectCollection('phpunit', 'closed');
        $cursor = $coll->find();
        $session = $client->startSession();
        $client->close();
        $client->close();
        // Handles made before the close stay safe to close (twice) after it.
        $session->close();
        $session->close();
        $cursor->close();
        $cursor->close();
        try {
            $session->startTransaction();
            $this->fail('a closed session started a transaction');
        } catch (LogicException $e) {
            $this->assertStringContainsString('session is closed', $e->getMessage());
        }
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage('client is closed');
        $coll->insertOne(['x' => 1]);
    }

    public function testASessionOfAnotherClientIsRefused(): void
    {
        $other = new Client(MONGO_URI);
        $session = $other->startSession();
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage('another client');
        $this->coll->insertOne(['x' => 1], ['session' => $session]);
    }

    public function testNotASession(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->coll->insertOne(['x' => 1], ['session' => 'nope']);
    }
}
