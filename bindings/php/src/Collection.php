<?php

declare(strict_types=1);

namespace MongoInline;

use FFI\CData;

/**
 * A collection: CRUD and queries. Documents are PHP arrays (see Bson);
 * write results are the library's result documents, as arrays.
 * Every method takes ['session' => Session] among its options.
 */
final class Collection
{
    public readonly string $name;

    public function __construct(public readonly Database $database, string $name)
    {
        $this->name = Library::name($name, 'the collection name');
    }

    /** @return array{CData, ?CData, string, string} */
    private function target(array $options): array
    {
        $client = $this->database->client;
        return [$client->handle(), Session::pointer($options['session'] ?? null, $client), $this->database->name, $this->name];
    }

    /** Inserts one document; ['insertedId' => ...]. */
    public function insertOne(array|object $document, array $options = []): array
    {
        self::only($options, []);
        $bson = Bson::encode($document);
        $ffi = Library::ffi();
        $result = $ffi->new('mi_buffer');
        Library::check($ffi->mi_insert_one(...[...$this->target($options), $bson, strlen($bson), null, 0, \FFI::addr($result)]));
        return Library::takeBuffer($result);
    }

    /** Inserts every document, in batches; ['insertedIds' => ['0' => id, ...]]. */
    public function insertMany(array $documents, array $options = []): array
    {
        self::only($options, []);
        $encoded = array_map(static fn ($d) => Bson::encode($d), array_values($documents));
        [$pointers, $lengths, $count, $keep] = Library::documentArray($encoded);
        $ffi = Library::ffi();
        $result = $ffi->new('mi_buffer');
        Library::check($ffi->mi_insert_many(...[...$this->target($options), $pointers, $lengths, $count, null, 0, \FFI::addr($result)]));
        unset($keep);
        return Library::takeBuffer($result);
    }

    /** Updates the first match; options upsert. */
    public function updateOne(array|object $filter, array|object $update, array $options = []): array
    {
        return $this->update('mi_update_one', $filter, $update, $options);
    }

    /** Updates every match; options upsert. */
    public function updateMany(array|object $filter, array|object $update, array $options = []): array
    {
        return $this->update('mi_update_many', $filter, $update, $options);
    }

    private function update(string $function, array|object $filter, array|object $update, array $options): array
    {
        $rest = self::only($options, ['upsert']);
        $filter = Bson::encode($filter);
        $update = Bson::encode($update);
        $extra = $rest === [] ? null : Bson::encode($rest);
        $ffi = Library::ffi();
        $result = $ffi->new('mi_buffer');
        Library::check($ffi->$function(...[
            ...$this->target($options), $filter, strlen($filter), $update, strlen($update),
            $extra, $extra === null ? 0 : strlen($extra), \FFI::addr($result),
        ]));
        return Library::takeBuffer($result);
    }

    /** Deletes the first match; ['deletedCount' => n]. */
    public function deleteOne(array|object $filter, array $options = []): array
    {
        return $this->delete('mi_delete_one', $filter, $options);
    }

    /** Deletes every match; ['deletedCount' => n]. */
    public function deleteMany(array|object $filter, array $options = []): array
    {
        return $this->delete('mi_delete_many', $filter, $options);
    }

    private function delete(string $function, array|object $filter, array $options): array
    {
        self::only($options, []);
        $filter = Bson::encode($filter);
        $ffi = Library::ffi();
        $result = $ffi->new('mi_buffer');
        Library::check($ffi->$function(...[...$this->target($options), $filter, strlen($filter), null, 0, \FFI::addr($result)]));
        return Library::takeBuffer($result);
    }

    /** How many documents match; options limit, skip. */
    public function countDocuments(array|object $filter = [], array $options = []): int
    {
        $rest = self::only($options, ['limit', 'skip']);
        $filter = Bson::encode($filter);
        $extra = $rest === [] ? null : Bson::encode($rest);
        $ffi = Library::ffi();
        $count = $ffi->new('uint64_t');
        Library::check($ffi->mi_count_documents(...[
            ...$this->target($options), $filter, strlen($filter), $extra, $extra === null ? 0 : strlen($extra), \FFI::addr($count),
        ]));
        return $count->cdata;
    }

    /** A Cursor over the matches; options sort, projection, limit, skip, batchSize. */
    public function find(array|object $filter = [], array $options = []): Cursor
    {
        $rest = self::only($options, ['sort', 'projection', 'limit', 'skip', 'batchSize']);
        $filter = Bson::encode($filter);
        $extra = $rest === [] ? null : Bson::encode($rest);
        $ffi = Library::ffi();
        $out = $ffi->new('mi_cursor *');
        Library::check($ffi->mi_find(...[
            ...$this->target($options), $filter, strlen($filter), $extra, $extra === null ? 0 : strlen($extra), \FFI::addr($out),
        ]));
        return new Cursor($out);
    }

    /** The first match, or null; options sort, projection, skip. */
    public function findOne(array|object $filter = [], array $options = []): ?array
    {
        $cursor = $this->find($filter, ['limit' => -1] + $options);
        $cursor->rewind();
        $document = $cursor->valid() ? $cursor->current() : null;
        $cursor->close();
        return $document;
    }

    /** A Cursor over the pipeline's results; options batchSize, allowDiskUse. */
    public function aggregate(array $pipeline, array $options = []): Cursor
    {
        $rest = self::only($options, ['batchSize', 'allowDiskUse']);
        $encoded = array_map(static fn ($stage) => Bson::encode($stage), array_values($pipeline));
        [$pointers, $lengths, $count, $keep] = Library::documentArray($encoded);
        $extra = $rest === [] ? null : Bson::encode($rest);
        $ffi = Library::ffi();
        $out = $ffi->new('mi_cursor *');
        Library::check($ffi->mi_aggregate(...[
            ...$this->target($options), $pointers, $lengths, $count, $extra, $extra === null ? 0 : strlen($extra), \FFI::addr($out),
        ]));
        unset($keep);
        return new Cursor($out);
    }

    /**
     * The options besides 'session', checked against $known: an unknown one
     * is an InvalidArgumentException, never silently dropped.
     */
    private static function only(array $options, array $known): array
    {
        unset($options['session']);
        foreach (array_keys($options) as $name) {
            if (!in_array($name, $known, true)) {
                throw new InvalidArgumentException("unknown option '$name'" . ($known === [] ? '' : '; known: ' . implode(', ', $known)));
            }
        }
        return $options;
    }
}
