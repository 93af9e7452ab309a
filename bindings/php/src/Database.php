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
}
