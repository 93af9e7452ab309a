<?php

declare(strict_types=1);

namespace MongoInline;

use FFI;
use FFI\CData;

/**
 * The C library, loaded once per process through FFI.
 *
 * Found through MONGO_INLINE_LIB (a path), else libmongo_inline.so beside
 * this package's src/, else the loader's search path. BSON input parameters
 * are declared `const char *` (ABI-identical to the header's
 * `const uint8_t *`) so that PHP strings pass without a copy.
 */
final class Library
{
    private const DECLARATIONS = <<<'C'
typedef struct mi_client mi_client;
typedef struct mi_session mi_session;
typedef struct mi_cursor mi_cursor;
typedef struct mi_error { int32_t domain; int32_t code; char *message; char **labels; size_t label_count; uint8_t *details; size_t details_len; } mi_error;
typedef struct mi_buffer { uint8_t *data; size_t len; } mi_buffer;
typedef struct mi_event { int32_t kind; const char *command_name; const char *database_name; int32_t request_id; int64_t duration_micros; const char *server_address; const uint8_t *document; size_t document_len; const char *message; const uint8_t *fields; size_t fields_len; } mi_event;
typedef void (*mi_event_callback)(void *user_data, const mi_event *event);
const char *mi_version(void);
void mi_error_free(mi_error *error);
void mi_buffer_free(mi_buffer *buffer);
void mi_string_free(char *string);
mi_error *mi_bson_from_json(const char *json, mi_buffer *out);
mi_error *mi_bson_to_json(const char *bson, size_t len, char **out);
mi_error *mi_client_new(const char *uri, mi_client **out);
void mi_client_free(mi_client *client);
mi_error *mi_client_set_event_callback(mi_client *client, mi_event_callback callback, void *user_data);
mi_error *mi_client_run_command(mi_client *client, mi_session *session, const char *db, const char *command, size_t command_len, mi_buffer *reply);
mi_error *mi_session_start(mi_client *client, const char *options, size_t options_len, mi_session **out);
void mi_session_free(mi_session *session);
mi_error *mi_session_id(mi_session *session, mi_buffer *out);
mi_error *mi_session_start_transaction(mi_session *session, const char *options, size_t options_len);
mi_error *mi_session_commit_transaction(mi_session *session, const char *options, size_t options_len);
mi_error *mi_session_abort_transaction(mi_session *session, const char *options, size_t options_len);
typedef mi_error *(*mi_transaction_callback)(void *user_data, mi_session *session);
mi_error *mi_session_with_transaction(mi_session *session, mi_transaction_callback callback, void *user_data, const char *options, size_t options_len);
mi_error *mi_error_new(int32_t domain, int32_t code, const char *message);
mi_error *mi_insert_one(mi_client *client, mi_session *session, const char *db, const char *coll, const char *document, size_t document_len, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_insert_many(mi_client *client, mi_session *session, const char *db, const char *coll, const char *const *documents, const size_t *lengths, size_t count, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_update_one(mi_client *client, mi_session *session, const char *db, const char *coll, const char *filter, size_t filter_len, const char *update, size_t update_len, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_update_many(mi_client *client, mi_session *session, const char *db, const char *coll, const char *filter, size_t filter_len, const char *update, size_t update_len, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_delete_one(mi_client *client, mi_session *session, const char *db, const char *coll, const char *filter, size_t filter_len, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_delete_many(mi_client *client, mi_session *session, const char *db, const char *coll, const char *filter, size_t filter_len, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_count_documents(mi_client *client, mi_session *session, const char *db, const char *coll, const char *filter, size_t filter_len, const char *options, size_t options_len, uint64_t *count);
mi_error *mi_find(mi_client *client, mi_session *session, const char *db, const char *coll, const char *filter, size_t filter_len, const char *options, size_t options_len, mi_cursor **out);
mi_error *mi_aggregate(mi_client *client, mi_session *session, const char *db, const char *coll, const char *const *stages, const size_t *lengths, size_t count, const char *options, size_t options_len, mi_cursor **out);
mi_error *mi_replace_one(mi_client *client, mi_session *session, const char *db, const char *coll, const char *filter, size_t filter_len, const char *replacement, size_t replacement_len, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_find_one_and_update(mi_client *client, mi_session *session, const char *db, const char *coll, const char *filter, size_t filter_len, const char *update, size_t update_len, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_find_one_and_replace(mi_client *client, mi_session *session, const char *db, const char *coll, const char *filter, size_t filter_len, const char *replacement, size_t replacement_len, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_find_one_and_delete(mi_client *client, mi_session *session, const char *db, const char *coll, const char *filter, size_t filter_len, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_distinct(mi_client *client, mi_session *session, const char *db, const char *coll, const char *field, const char *filter, size_t filter_len, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_estimated_document_count(mi_client *client, mi_session *session, const char *db, const char *coll, const char *options, size_t options_len, uint64_t *count);
mi_error *mi_bulk_write(mi_client *client, mi_session *session, const char *db, const char *coll, const char *const *models, const size_t *lengths, size_t count, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_create_indexes(mi_client *client, mi_session *session, const char *db, const char *coll, const char *const *indexes, const size_t *lengths, size_t count, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_list_indexes(mi_client *client, mi_session *session, const char *db, const char *coll, const char *options, size_t options_len, mi_cursor **out);
mi_error *mi_list_index_names(mi_client *client, mi_session *session, const char *db, const char *coll, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_drop_index(mi_client *client, mi_session *session, const char *db, const char *coll, const char *name, const char *options, size_t options_len);
mi_error *mi_drop_indexes(mi_client *client, mi_session *session, const char *db, const char *coll, const char *options, size_t options_len);
mi_error *mi_drop_collection(mi_client *client, mi_session *session, const char *db, const char *coll, const char *options, size_t options_len);
mi_error *mi_create_search_indexes(mi_client *client, mi_session *session, const char *db, const char *coll, const char *const *models, const size_t *lengths, size_t count, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_update_search_index(mi_client *client, mi_session *session, const char *db, const char *coll, const char *name, const char *definition, size_t definition_len, const char *options, size_t options_len);
mi_error *mi_drop_search_index(mi_client *client, mi_session *session, const char *db, const char *coll, const char *name, const char *options, size_t options_len);
mi_error *mi_list_search_indexes(mi_client *client, mi_session *session, const char *db, const char *coll, const char *options, size_t options_len, mi_cursor **out);
mi_error *mi_create_collection(mi_client *client, mi_session *session, const char *db, const char *name, const char *options, size_t options_len);
mi_error *mi_drop_database(mi_client *client, mi_session *session, const char *db, const char *options, size_t options_len);
mi_error *mi_list_collections(mi_client *client, mi_session *session, const char *db, const char *options, size_t options_len, mi_cursor **out);
mi_error *mi_list_collection_names(mi_client *client, mi_session *session, const char *db, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_database_aggregate(mi_client *client, mi_session *session, const char *db, const char *const *stages, const size_t *lengths, size_t count, const char *options, size_t options_len, mi_cursor **out);
mi_error *mi_list_databases(mi_client *client, mi_session *session, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_list_database_names(mi_client *client, mi_session *session, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_client_bulk_write(mi_client *client, mi_session *session, const char *const *models, const size_t *lengths, size_t count, const char *options, size_t options_len, mi_buffer *result);
mi_error *mi_cursor_next(mi_cursor *cursor, const char **document, size_t *len);
void mi_cursor_free(mi_cursor *cursor);
C;

    private static ?FFI $ffi = null;

    /** The loaded library. */
    public static function ffi(): FFI
    {
        return self::$ffi ??= FFI::cdef(self::DECLARATIONS, self::path());
    }

    private static function path(): string
    {
        $explicit = getenv('MONGO_INLINE_LIB');
        if (is_string($explicit) && $explicit !== '') {
            return $explicit;
        }
        $beside = dirname(__DIR__) . '/libmongo_inline.so';
        return is_file($beside) ? $beside : 'libmongo_inline.so';
    }

    /** Throws the exception for an mi_error (freeing it); null is success. */
    public static function check(?CData $error): void
    {
        if ($error === null) {
            return;
        }
        $message = FFI::string($error->message);
        $labels = [];
        for ($i = 0; $i < $error->label_count; $i++) {
            $labels[] = FFI::string($error->labels[$i]);
        }
        $details = FFI::isNull($error->details) ? null : Bson::decode(FFI::string($error->details, $error->details_len));
        // The exception owns the error: a transaction callback may hand it
        // back to the library (its labels decide retries).
        throw Exception::fromDomain($error->domain, $message, $error->code, $labels, $error, $details);
    }

    /** The document a filled mi_buffer holds, as a PHP array (null when the library left it empty: none); frees the buffer. */
    public static function takeBuffer(CData $buffer): ?array
    {
        if (FFI::isNull($buffer->data)) {
            return null;
        }
        try {
            return Bson::decode(FFI::string($buffer->data, $buffer->len));
        } finally {
            self::ffi()->mi_buffer_free(FFI::addr($buffer));
        }
    }

    /** An mi_event as an array: the fields its kind has (see Client::__construct). */
    public static function event(CData $e): array
    {
        $kinds = [1 => 'command_started', 2 => 'command_succeeded', 3 => 'command_failed', 4 => 'sdam'];
        $event = ['kind' => $kinds[$e->kind] ?? $e->kind];
        // FFI reads a non-NULL `const char *` field as a PHP string already.
        $text = static fn ($p) => is_string($p) || $p === null ? $p : (FFI::isNull($p) ? null : FFI::string($p));
        $bson = static fn ($p, int $len) => $p === null || FFI::isNull($p) ? null : Bson::decode(FFI::string($p, $len));
        $strings = ['commandName' => $e->command_name, 'databaseName' => $e->database_name, 'serverAddress' => $e->server_address, 'message' => $e->message];
        foreach ($strings as $name => $pointer) {
            $value = $text($pointer);
            if ($value !== null) {
                $event[$name] = $value;
            }
        }
        if ($e->kind !== 4) {
            $event['requestId'] = $e->request_id;
        }
        if ($e->kind === 2 || $e->kind === 3) {
            $event['durationMicros'] = $e->duration_micros;
        }
        foreach (['document' => $bson($e->document, $e->document_len), 'fields' => $bson($e->fields, $e->fields_len)] as $name => $value) {
            if ($value !== null) {
                $event[$name] = $value;
            }
        }
        return $event;
    }

    /**
     * Options (official names) as BSON, or null for none; 'session' is the
     * caller's, not the library's. An unknown name is the library's error.
     *
     * @return array{?string, int}
     */
    public static function options(array $options): array
    {
        unset($options['session']);
        if ($options === []) {
            return [null, 0];
        }
        $bson = Bson::encode($options);
        return [$bson, strlen($bson)];
    }

    /** A NUL-free UTF-8 name or URI, or an InvalidArgumentException naming it. */
    public static function name(mixed $name, string $what): string
    {
        if (!is_string($name)) {
            throw new InvalidArgumentException("$what must be a string, not " . get_debug_type($name));
        }
        if (str_contains($name, "\0")) {
            throw new InvalidArgumentException("$what contains a NUL byte");
        }
        return $name;
    }

    /**
     * Documents as a C array of pointers and one of lengths, for
     * mi_insert_many and mi_aggregate. The returned CData owns the copies.
     *
     * @param list<string> $encoded BSON documents
     * @return array{CData, CData, int, list<CData>}
     */
    public static function documentArray(array $encoded): array
    {
        $ffi = self::ffi();
        $count = count($encoded);
        $pointers = $ffi->new('const char *[' . max($count, 1) . ']');
        $lengths = $ffi->new('size_t[' . max($count, 1) . ']');
        $keep = [];
        foreach (array_values($encoded) as $i => $bson) {
            $copy = $ffi->new('char[' . strlen($bson) . ']');
            FFI::memcpy($copy, $bson, strlen($bson));
            $keep[] = $copy;
            $pointers[$i] = $ffi->cast('const char *', $copy);
            $lengths[$i] = strlen($bson);
        }
        return [$pointers, $lengths, $count, $keep];
    }
}
