<?php

declare(strict_types=1);

namespace MongoInline;

use FFI\CData;

/**
 * A collection: CRUD and queries. Documents are PHP arrays (see Bson);
 * write results are the library's result documents, as arrays.
 * Every method takes ['session' => Session] among its options, and every
 * one but the search-index methods 'timeoutMS' (the operation's limit in
 * milliseconds, its expiry a TimeoutException); those opening a cursor
 * also 'timeoutMode' ('cursorLifetime' or 'iteration').
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
        $rest = self::only($options, []);
        $bson = Bson::encode($document);
        $ffi = Library::ffi();
        $result = $ffi->new('mi_buffer');
        Library::check($ffi->mi_insert_one(...[...$this->target($options), $bson, strlen($bson), ...Library::options($rest), \FFI::addr($result)]));
        return Library::takeBuffer($result);
    }

    /** Inserts every document, in batches; ['insertedIds' => ['0' => id, ...]]. */
    public function insertMany(array $documents, array $options = []): array
    {
        $rest = self::only($options, []);
        $encoded = array_map(static fn ($d) => Bson::encode($d), array_values($documents));
        [$pointers, $lengths, $count, $keep] = Library::documentArray($encoded);
        $ffi = Library::ffi();
        $result = $ffi->new('mi_buffer');
        Library::check($ffi->mi_insert_many(...[...$this->target($options), $pointers, $lengths, $count, ...Library::options($rest), \FFI::addr($result)]));
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
        $rest = self::only($options, []);
        $filter = Bson::encode($filter);
        $ffi = Library::ffi();
        $result = $ffi->new('mi_buffer');
        Library::check($ffi->$function(...[...$this->target($options), $filter, strlen($filter), ...Library::options($rest), \FFI::addr($result)]));
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
        $rest = self::only($options, ['sort', 'projection', 'limit', 'skip', 'batchSize', 'timeoutMode']);
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
        $rest = self::only($options, ['batchSize', 'allowDiskUse', 'timeoutMode']);
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

    /** Replaces the first match; ['matchedCount', 'modifiedCount', 'upsertedId'?]. Options by their official names. */
    public function replaceOne(array|object $filter, array|object $replacement, array $options = []): array
    {
        return $this->withResult('mi_replace_one', $options, ...self::bson($filter, $replacement));
    }

    /** Updates the first match; it as it was (returnDocument 'after': as it is), or null. */
    public function findOneAndUpdate(array|object $filter, array|object $update, array $options = []): ?array
    {
        return $this->withResult('mi_find_one_and_update', $options, ...self::bson($filter, $update));
    }

    /** Replaces the first match; returned as findOneAndUpdate does. */
    public function findOneAndReplace(array|object $filter, array|object $replacement, array $options = []): ?array
    {
        return $this->withResult('mi_find_one_and_replace', $options, ...self::bson($filter, $replacement));
    }

    /** Deletes the first match and returns it, or null. */
    public function findOneAndDelete(array|object $filter, array $options = []): ?array
    {
        return $this->withResult('mi_find_one_and_delete', $options, ...self::bson($filter));
    }

    /** The distinct values of $key among the matches. */
    public function distinct(string $key, array|object $filter = [], array $options = []): array
    {
        return $this->withResult('mi_distinct', $options, Library::name($key, 'the key'), ...self::bson($filter))['values'];
    }

    /** The collection's count from its metadata. */
    public function estimatedDocumentCount(array $options = []): int
    {
        $ffi = Library::ffi();
        $count = $ffi->new('uint64_t');
        Library::check($ffi->mi_estimated_document_count(...[...$this->target($options), ...Library::options($options), \FFI::addr($count)]));
        return $count->cdata;
    }

    /** Runs write models (['insertOne' => ['document' => ...]], ['updateOne' => [...]], ...). */
    public function bulkWrite(array $requests, array $options = []): array
    {
        [$pointers, $lengths, $count, $keep] = Library::documentArray(array_map(static fn ($r) => Bson::encode($r), array_values($requests)));
        return $this->withResult('mi_bulk_write', $options, $pointers, $lengths, $count);
    }

    /** Creates indexes (['key' => [...], 'name'? ...]); their names. */
    public function createIndexes(array $indexes, array $options = []): array
    {
        [$pointers, $lengths, $count, $keep] = Library::documentArray(array_map(static fn ($i) => Bson::encode($i), array_values($indexes)));
        return $this->withResult('mi_create_indexes', $options, $pointers, $lengths, $count)['indexNames'];
    }

    /** Creates one index on $keys; its name. $index: the index's own options (name, unique...). */
    public function createIndex(array|object $keys, array $index = [], array $options = []): string
    {
        return $this->createIndexes([['key' => $keys] + $index], $options)[0];
    }

    /** A Cursor over the index specifications. */
    public function listIndexes(array $options = []): Cursor
    {
        $ffi = Library::ffi();
        $out = $ffi->new('mi_cursor *');
        Library::check($ffi->mi_list_indexes(...[...$this->target($options), ...Library::options($options), \FFI::addr($out)]));
        return new Cursor($out);
    }

    /** The index names. */
    public function listIndexNames(array $options = []): array
    {
        return $this->withResult('mi_list_index_names', $options)['names'];
    }

    /** Drops the index called $name. */
    public function dropIndex(string $name, array $options = []): void
    {
        Library::check(Library::ffi()->mi_drop_index(...[...$this->target($options), Library::name($name, 'the index name'), ...Library::options($options)]));
    }

    /** Drops every index but _id's. */
    public function dropIndexes(array $options = []): void
    {
        Library::check(Library::ffi()->mi_drop_indexes(...[...$this->target($options), ...Library::options($options)]));
    }

    /** Drops the collection (no error if it does not exist). */
    public function drop(array $options = []): void
    {
        Library::check(Library::ffi()->mi_drop_collection(...[...$this->target($options), ...Library::options($options)]));
    }

    /**
     * Creates an Atlas Search index from $definition; its name. Options
     * name, type ('search' or 'vectorSearch'). A deployment without Atlas
     * Search refuses it: a CommandException with the server's code (115).
     */
    public function createSearchIndex(array|object $definition, array $options = []): string
    {
        $model = ['definition' => $definition];
        foreach (['name', 'type'] as $field) {
            if (isset($options[$field])) {
                $model[$field] = $options[$field];
            }
            unset($options[$field]);
        }
        return $this->createSearchIndexes([$model], $options)[0];
    }

    /** Creates search indexes from models ['definition' => ..., 'name'?, 'type'?]; their names. */
    public function createSearchIndexes(array $models, array $options = []): array
    {
        [$pointers, $lengths, $count, $keep] = Library::documentArray(array_map(static fn ($m) => Bson::encode($m), array_values($models)));
        return $this->withResult('mi_create_search_indexes', $options, $pointers, $lengths, $count)['indexNames'];
    }

    /** Replaces the definition of the search index called $name. */
    public function updateSearchIndex(string $name, array|object $definition, array $options = []): void
    {
        Library::check(Library::ffi()->mi_update_search_index(...[
            ...$this->target($options), Library::name($name, 'the index name'), ...self::bson($definition), ...Library::options($options),
        ]));
    }

    /** Drops the search index called $name. */
    public function dropSearchIndex(string $name, array $options = []): void
    {
        Library::check(Library::ffi()->mi_drop_search_index(...[...$this->target($options), Library::name($name, 'the index name'), ...Library::options($options)]));
    }

    /** A Cursor over the search indexes; options name (only that one), batchSize, comment... */
    public function listSearchIndexes(array $options = []): Cursor
    {
        $ffi = Library::ffi();
        $out = $ffi->new('mi_cursor *');
        Library::check($ffi->mi_list_search_indexes(...[...$this->target($options), ...Library::options($options), \FFI::addr($out)]));
        return new Cursor($out);
    }

    /** @return list<string|int> each document as BSON and its length */
    private static function bson(array|object ...$documents): array
    {
        $arguments = [];
        foreach ($documents as $document) {
            $bson = Bson::encode($document);
            array_push($arguments, $bson, strlen($bson));
        }
        return $arguments;
    }

    /** Calls $function(target..., $arguments..., options, &result) and decodes the result. */
    private function withResult(string $function, array $options, mixed ...$arguments): ?array
    {
        $ffi = Library::ffi();
        $result = $ffi->new('mi_buffer');
        Library::check($ffi->$function(...[...$this->target($options), ...$arguments, ...Library::options($options), \FFI::addr($result)]));
        return Library::takeBuffer($result);
    }

    /**
     * The options besides 'session', checked against $known and timeoutMS
     * (every such operation has it): an unknown one is an
     * InvalidArgumentException, never silently dropped.
     */
    private static function only(array $options, array $known): array
    {
        unset($options['session']);
        $known[] = 'timeoutMS';
        foreach (array_keys($options) as $name) {
            if (!in_array($name, $known, true)) {
                throw new InvalidArgumentException("unknown option '$name'" . ($known === [] ? '' : '; known: ' . implode(', ', $known)));
            }
        }
        return $options;
    }
}
