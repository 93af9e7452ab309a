<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\Client;
use MongoInline\Collection;

abstract class TestCase extends \PHPUnit\Framework\TestCase
{
    protected Client $client;
    protected Collection $coll;

    protected function setUp(): void
    {
        $this->client = new Client(MONGO_URI);
        $this->coll = $this->client->selectCollection('phpunit', 'c_' . bin2hex(random_bytes(6)));
    }

    protected function tearDown(): void
    {
        $this->client->close();
    }

    protected function failPoint(array $mode, array $data): void
    {
        $this->client->selectDatabase('admin')->command(
            ['configureFailPoint' => 'failCommand', 'mode' => $mode, 'data' => $data]
        );
    }
}
