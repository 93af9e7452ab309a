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
    public function __construct(string $uri = 'mongodb://127.0.0.1:27017/')
    {
        parent::__construct();
        $ffi = Library::ffi();
        $out = $ffi->new('mi_client *');
        Library::check($ffi->mi_client_new(Library::name($uri, 'the URI'), \FFI::addr($out)));
        $this->ptr = $out;
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
