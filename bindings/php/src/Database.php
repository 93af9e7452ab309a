<?php

declare(strict_types=1);

namespace MongoInline;

/** A database of a client (no I/O of its own). */
final class Database
{
    public readonly string $name;

    public function __construct(public readonly Client $client, string $name)
    {
        $this->name = Library::name($name, 'the database name');
    }

    public function selectCollection(string $name): Collection
    {
        return new Collection($this, $name);
    }

    public function __get(string $name): Collection
    {
        return new Collection($this, $name);
    }

    /** Runs $command (its first key names it) on the primary; the reply. */
    public function command(array|object $command, ?Session $session = null): array
    {
        $bson = Bson::encode($command);
        $ffi = Library::ffi();
        $reply = $ffi->new('mi_buffer');
        Library::check($ffi->mi_client_run_command(
            $this->client->handle(),
            Session::pointer($session, $this->client),
            $this->name,
            $bson,
            strlen($bson),
            \FFI::addr($reply)
        ));
        return Library::takeBuffer($reply);
    }

    /** Drops the database. */
    public function drop(array $options = []): void
    {
        Library::check(Library::ffi()->mi_drop_database(...[...$this->target($options), ...Library::options($options)]));
    }

    /** Creates collection $name (options by their official names: capped, validator...). */
    public function createCollection(string $name, array $options = []): Collection
    {
        Library::check(Library::ffi()->mi_create_collection(...[
            ...$this->target($options), Library::name($name, 'the collection name'), ...Library::options($options),
        ]));
        return new Collection($this, $name);
    }

    /** A Cursor over the collections' specifications (options: filter, nameOnly...). */
    public function listCollections(array $options = []): Cursor
    {
        $ffi = Library::ffi();
        $out = $ffi->new('mi_cursor *');
        Library::check($ffi->mi_list_collections(...[...$this->target($options), ...Library::options($options), \FFI::addr($out)]));
        return new Cursor($out);
    }

    /** The collections' names. */
    public function listCollectionNames(array $options = []): array
    {
        $ffi = Library::ffi();
        $out = $ffi->new('mi_buffer');
        Library::check($ffi->mi_list_collection_names(...[...$this->target($options), ...Library::options($options), \FFI::addr($out)]));
        return Library::takeBuffer($out)['names'];
    }

    /** A Cursor over a database-level pipeline ($documents, $currentOp...). */
    public function aggregate(array $pipeline, array $options = []): Cursor
    {
        [$pointers, $lengths, $count, $keep] = Library::documentArray(array_map(static fn ($s) => Bson::encode($s), array_values($pipeline)));
        $ffi = Library::ffi();
        $out = $ffi->new('mi_cursor *');
        Library::check($ffi->mi_database_aggregate(...[
            ...$this->target($options), $pointers, $lengths, $count, ...Library::options($options), \FFI::addr($out),
        ]));
        return new Cursor($out);
    }

    /** @return array{\FFI\CData, ?\FFI\CData, string} */
    private function target(array $options): array
    {
        return [$this->client->handle(), Session::pointer($options['session'] ?? null, $this->client), $this->name];
    }
}
