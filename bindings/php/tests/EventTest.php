<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\Client;

/** Command and SDAM events reach a PHP listener, as arrays with their fields. */
final class EventTest extends TestCase
{
    public function testCommandAndSdamEventsReachTheListener(): void
    {
        $events = [];
        $client = new Client(MONGO_URI, static function (array $event) use (&$events): void {
            $events[] = $event;
        });
        $coll = $client->selectCollection('phpunit', $this->coll->name);
        $coll->insertOne(['_id' => 1]);
        try {
            $coll->insertOne(['_id' => 1]);
        } catch (\MongoInline\WriteException) {
        }
        $client->close();

        $inserts = array_values(array_filter($events, static fn ($e) => ($e['commandName'] ?? '') === 'insert'));
        $this->assertSame('command_started', $inserts[0]['kind']);
        $this->assertSame('phpunit', $inserts[0]['databaseName']);
        $this->assertSame($this->coll->name, $inserts[0]['document']['insert']);
        $this->assertSame('commandStartedEvent', $inserts[0]['fields']['event']);
        $this->assertSame('command_succeeded', $inserts[1]['kind']);
        $this->assertSame($inserts[0]['requestId'], $inserts[1]['requestId']);
        $this->assertGreaterThan(0, $inserts[1]['durationMicros']);
        $sdam = array_values(array_filter($events, static fn ($e) => $e['kind'] === 'sdam'));
        $this->assertNotEmpty($sdam);
        $kinds = array_map(static fn ($e) => $e['fields']['event'], $sdam);
        $this->assertContains('topologyDescriptionChangedEvent', $kinds);
    }

    public function testAListenerThatThrowsIsLoggedNotACrash(): void
    {
        $log = tempnam(sys_get_temp_dir(), 'events');
        $previous = ini_set('error_log', $log);
        try {
            $client = new Client(MONGO_URI, static function (array $event): void {
                throw new \RuntimeException('listener failed');
            });
            $client->selectCollection('phpunit', $this->coll->name)->insertOne(['x' => 1]);
            $client->close();
        } finally {
            ini_set('error_log', (string) $previous);
        }
        $logged = (string) file_get_contents($log);
        unlink($log);
        $this->assertStringContainsString('the event listener threw RuntimeException: listener failed', $logged);
        $this->assertSame(1, $this->coll->countDocuments([]));
    }
}
