<?php

declare(strict_types=1);

namespace MongoInline;

use FFI\CData;

/**
 * A deployment, reached through one connection string. The constructor
 * parses and validates the URI only: no I/O until the first operation.
 *
 * After pcntl_fork() the child keeps using the client (the library drops
 * the inherited sockets and session pool and draws its own session ids);
 * sessions and cursors opened before the fork stay the parent's.
 */
final class Client extends Handle
{
    /** The event callback handed to the library, kept alive as long as the client. */
    private ?\Closure $onEvent = null;

    /**
     * $eventListener, if given, is called with an array for every command
     * started/succeeded/failed and SDAM event: 'kind' ('command_started',
     * 'command_succeeded', 'command_failed', 'sdam'), 'commandName',
     * 'databaseName', 'requestId', 'durationMicros', 'serverAddress',
     * 'document' (the command or reply), 'message', and 'fields' (every
     * field of the event by the monitoring specs' names), each where the kind
     * has it. It must not call the client; what it throws goes to error_log(),
     * never into the library.
     */
    public function __construct(string $uri = 'mongodb://127.0.0.1:27017/', ?callable $eventListener = null)
    {
        parent::__construct();
        $ffi = Library::ffi();
        $out = $ffi->new('mi_client *');
        Library::check($ffi->mi_client_new(Library::name($uri, 'the URI'), \FFI::addr($out)));
        $this->ptr = $out;
        if ($eventListener !== null) {
            $this->onEvent = self::eventTrampoline($eventListener(...));
            Library::check($ffi->mi_client_set_event_callback($this->ptr, $this->onEvent, null));
        }
    }

    /** The C callback: the event as an array, the listener's exceptions kept out of C. */
    private static function eventTrampoline(\Closure $listener): \Closure
    {
        return static function ($userData, $pointer) use ($listener): void {
            try {
                $listener(Library::event($pointer[0]));
            } catch (\Throwable $e) {
                // Nothing may be thrown through C (PHP makes it fatal), and an
                // error handler may turn a warning into an exception: logged.
                error_log('mongo-inline: the event listener threw ' . get_class($e) . ': ' . $e->getMessage());
            }
        };
    }

    protected function kind(): string
    {
        return 'client';
    }

    protected function free(CData $ptr): void
    {
        Library::ffi()->mi_client_free($ptr);
    }

    protected function survivesFork(): bool
    {
        return true;
    }

    /** @internal the live handle, for Database, Collection and Session */
    public function handle(): CData
    {
        return $this->live();
    }

    public function selectDatabase(string $name): Database
    {
        return new Database($this, $name);
    }

    public function selectCollection(string $database, string $collection): Collection
    {
        return new Collection(new Database($this, $database), $collection);
    }

    public function __get(string $name): Database
    {
        return new Database($this, $name);
    }

    /**
     * An explicit session; options ['causalConsistency' => bool, 'snapshot' => bool].
     */
    public function startSession(array $options = []): Session
    {
        return new Session($this, $options);
    }

    /** The databases: [['name', 'sizeOnDisk', 'empty'], ...]. */
    public function listDatabases(array $options = []): array
    {
        return $this->listing('mi_list_databases', $options)['databases'];
    }

    /** The databases' names. */
    public function listDatabaseNames(array $options = []): array
    {
        return $this->listing('mi_list_database_names', $options)['names'];
    }

    /** Drops the database $name. */
    public function dropDatabase(string $name, array $options = []): void
    {
        (new Database($this, $name))->drop($options);
    }

    /**
     * Runs write models on any collections in as few bulkWrite commands as
     * the server allows (MongoDB 8.0+): ['insertOne' => ['namespace' =>
     * 'db.coll', 'document' => [...]]], ['updateOne' => ['namespace', 'filter',
     * 'update']], ... The sums ['insertedCount', ...]; ['verboseResults' =>
     * true] adds each write's result by index. A failed write throws a
     * WriteException whose getDetails() holds writeErrors (by index),
     * writeConcernErrors and partialResult.
     */
    public function bulkWrite(array $models, array $options = []): array
    {
        $ffi = Library::ffi();
        [$pointers, $lengths, $count, $keep] = Library::documentArray(array_map(static fn ($m) => Bson::encode($m), array_values($models)));
        $out = $ffi->new('mi_buffer');
        Library::check($ffi->mi_client_bulk_write($this->live(), Session::pointer($options['session'] ?? null, $this), $pointers, $lengths, $count, ...[...Library::options($options), \FFI::addr($out)]));
        return Library::takeBuffer($out);
    }

    private function listing(string $function, array $options): array
    {
        $ffi = Library::ffi();
        $out = $ffi->new('mi_buffer');
        Library::check($ffi->$function($this->live(), Session::pointer($options['session'] ?? null, $this), ...[...Library::options($options), \FFI::addr($out)]));
        return Library::takeBuffer($out);
    }
}
