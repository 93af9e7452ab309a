"""Client, Database, Collection, Cursor and ClientSession over the C ABI.

Handles are freed by close() (idempotent: a second close does nothing), by
the `with` block that opened them, or when garbage-collected. A closed
handle's methods raise InvalidOperation.

fork(): a Client keeps working in the child (the library notices the new
process, drops the inherited sockets and session pool, and draws its own
session ids). Sessions and cursors opened before the fork belong to the
parent: in the child their methods raise InvalidOperation and closing them
drops them without touching the parent's server-side state.
"""

import contextlib
import contextvars
import ctypes as C
import math
import os
import time

import bson

from . import _ffi
from ._ffi import check, encode, lib, name_bytes, size, take_buffer
from .errors import ArgumentError, InvalidOperation, OperationTimeout

# The deadline (time.monotonic()) of the innermost `timeout` block, if any.
_DEADLINE = contextvars.ContextVar("mongo_inline_deadline", default=None)


@contextlib.contextmanager
def timeout(seconds):
    """As pymongo.timeout: every operation in the block shares one deadline,
    `seconds` from now (a nested block cannot extend its outer one's). Each
    operation is sent with the time left as its timeoutMS, so the library
    bounds all it does (server selection, every attempt, the server's own
    time); its expiry is an OperationTimeout. None lifts the deadline."""
    if seconds is not None and (isinstance(seconds, bool)
                                or not isinstance(seconds, (int, float)) or seconds < 0):
        raise ArgumentError(f"timeout must be a non-negative number of seconds, not {seconds!r}")
    deadline = None
    if seconds is not None:
        deadline = time.monotonic() + seconds
        outer = _DEADLINE.get()
        if outer is not None:
            deadline = min(deadline, outer)
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _options_bson(options=None):
    """An operation's options as BSON (None: none), with the time left of
    the enclosing `timeout` block as timeoutMS unless options set one."""
    deadline = _DEADLINE.get()
    if deadline is not None and not (options and "timeoutMS" in options):
        left = math.ceil((deadline - time.monotonic()) * 1000)
        if left <= 0:
            raise OperationTimeout("the timeout block's deadline passed before the operation")
        options = {**(options or {}), "timeoutMS": left}
    return encode(options, "options")


class _Handle:
    """An owned C handle, freed once, never in a process that inherited it."""

    _free = None  # the mi_*_free function
    _kind = "handle"
    # Whether a forked child may use (and free) the handle it inherited.
    _survives_fork = False

    def __init__(self):
        self._ptr = C.c_void_p()
        self._pid = os.getpid()

    def _live(self):
        if not self._ptr:
            raise InvalidOperation(f"the {self._kind} is closed")
        if self._pid != os.getpid() and not self._survives_fork:
            raise InvalidOperation(
                f"the {self._kind} was opened in the parent process before fork(); "
                "open a new one in this process"
            )
        return self._ptr

    def close(self):
        """Frees the handle; a second call does nothing."""
        ptr, self._ptr = self._ptr, C.c_void_p()
        if ptr and (self._pid == os.getpid() or self._survives_fork):
            type(self)._free(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __del__(self):
        # At interpreter exit the module's globals may be gone already.
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to from __del__
            pass


class Client(_Handle):
    """A deployment, reached through one connection string.

    Parses and validates the URI only: no I/O until the first operation.
    `event_listener`, if given, is called with a dict for every command
    started/succeeded/failed and SDAM event (it must not call the client).
    """

    _kind = "client"
    _survives_fork = True  # the library starts afresh in the child

    def __init__(self, uri="mongodb://127.0.0.1:27017/", event_listener=None):
        super().__init__()
        check(lib.mi_client_new(name_bytes(uri, "uri"), C.byref(self._ptr)))
        self._callback = None
        if event_listener is not None:
            self._callback = _ffi.EVENT_CALLBACK(_event_trampoline(event_listener))
            check(lib.mi_client_set_event_callback(self._ptr, self._callback, None))

    @staticmethod
    def _free(ptr):
        lib.mi_client_free(ptr)

    def __getitem__(self, name):
        return Database(self, name)

    def get_database(self, name):
        """The database `name` (no I/O)."""
        return Database(self, name)

    def start_session(self, causal_consistency=None, snapshot=None, default_timeout_ms=None):
        """An explicit session (close it, or use it in a `with` block);
        default_timeout_ms bounds its commits and aborts outside a `timeout`
        block."""
        options = {}
        if causal_consistency is not None:
            options["causalConsistency"] = bool(causal_consistency)
        if snapshot is not None:
            options["snapshot"] = bool(snapshot)
        if default_timeout_ms is not None:
            options["defaultTimeoutMS"] = default_timeout_ms
        return ClientSession(self, encode(options or None, "session options"))

    def list_databases(self, options=None, session=None):
        """The databases: [{"name", "sizeOnDisk", "empty"}, ...]."""
        return _client_listing(self, lib.mi_list_databases, options, session)["databases"]

    def list_database_names(self, options=None, session=None):
        """The databases' names."""
        return _client_listing(self, lib.mi_list_database_names, options, session)["names"]

    def drop_database(self, name, options=None, session=None):
        """Drops the database `name` (options: writeConcern)."""
        Database(self, name).drop(options, session)

    def bulk_write(self, models, options=None, session=None):
        """Runs write models on any collections in as few bulkWrite commands as
        the server allows (MongoDB 8.0+): {"insertOne": {"namespace": "db.coll",
        "document": ...}}, {"updateOne": {"namespace", "filter", "update"}}, ...
        The sums {"insertedCount", ...}; options {"verboseResults": True} adds
        each write's result by index. A failed write raises WriteError whose
        `details` hold writeErrors (by index), writeConcernErrors and
        partialResult."""
        pointers, lengths, count, _keep = _ffi.document_array(list(models), "write model")
        o = _options_bson(options)
        out = _ffi.MiBuffer()
        check(lib.mi_client_bulk_write(self._live(), _session_ptr(session, self), pointers,
                                       lengths, count, o, size(o), C.byref(out)))
        return take_buffer(out)


def _client_listing(client, function, options, session):
    out = _ffi.MiBuffer()
    data = _options_bson(options)
    check(function(client._live(), _session_ptr(session, client), data, size(data), C.byref(out)))
    return take_buffer(out)


def _event_trampoline(listener):
    kinds = {1: "command_started", 2: "command_succeeded", 3: "command_failed", 4: "sdam"}

    def on_event(_user_data, event_pointer):
        e = event_pointer.contents
        event = {"kind": kinds.get(e.kind, e.kind)}
        for field in ("command_name", "database_name", "server_address", "message"):
            value = getattr(e, field)
            if value is not None:
                event[field] = value.decode("utf-8", "replace")
        if e.kind in (1, 2, 3):
            event["request_id"] = e.request_id
        if e.kind in (2, 3):
            event["duration_micros"] = e.duration_micros
        if e.document:
            event["document"] = bson.decode(C.string_at(e.document, e.document_len))
        try:
            listener(event)
        except Exception:  # noqa: BLE001 - an exception cannot cross into C
            import traceback

            traceback.print_exc()

    return on_event


class Database:
    """A database of a client (no I/O of its own)."""

    def __init__(self, client, name):
        self.client = client
        self.name = name
        self._name = name_bytes(name, "database name")

    def __getitem__(self, name):
        return Collection(self, name)

    def get_collection(self, name):
        """The collection `name` (no I/O)."""
        return Collection(self, name)

    def command(self, command, session=None, read_preference=None):
        """Runs `command` (a dict; its first key names it) on the primary, or
        as `read_preference` says ("secondary", {"mode": ...}); the reply."""
        body = encode(command, "command")
        options = _options_bson(
            {"readPreference": read_preference} if read_preference is not None else None)
        reply = _ffi.MiBuffer()
        check(
            lib.mi_run_command(
                self.client._live(), _session_ptr(session, self.client), self._name, body,
                len(body), options, size(options), C.byref(reply),
            )
        )
        return take_buffer(reply)


def _database_methods():
    """Database's operations beyond command (kept apart to keep it short)."""

    def drop(self, options=None, session=None):
        """Drops the database (options: writeConcern)."""
        data = _options_bson(options)
        check(lib.mi_drop_database(self.client._live(), _session_ptr(session, self.client),
                                   self._name, data, size(data)))

    def create_collection(self, name, options=None, session=None):
        """Creates collection `name` (options by their official names: capped, validator...)."""
        data = _options_bson(options)
        check(lib.mi_create_collection(self.client._live(), _session_ptr(session, self.client),
                                       self._name, name_bytes(name, "collection name"), data,
                                       size(data)))
        return Collection(self, name)

    def list_collections(self, options=None, session=None):
        """A Cursor over the collections' specifications (options: filter, nameOnly...)."""
        data = _options_bson(options)
        cursor = Cursor(self.client)
        check(lib.mi_list_collections(self.client._live(), _session_ptr(session, self.client),
                                      self._name, data, size(data), C.byref(cursor._ptr)))
        return cursor

    def list_collection_names(self, options=None, session=None):
        """The collections' names."""
        data = _options_bson(options)
        out = _ffi.MiBuffer()
        check(lib.mi_list_collection_names(self.client._live(), _session_ptr(session, self.client),
                                           self._name, data, size(data), C.byref(out)))
        return take_buffer(out)["names"]

    def aggregate(self, pipeline, options=None, session=None):
        """A Cursor over a database-level pipeline ($documents, $currentOp...)."""
        pointers, lengths, count, _keep = _ffi.document_array(list(pipeline), "pipeline stage")
        data = _options_bson(options)
        cursor = Cursor(self.client)
        check(lib.mi_database_aggregate(self.client._live(), _session_ptr(session, self.client),
                                        self._name, pointers, lengths, count, data, size(data),
                                        C.byref(cursor._ptr)))
        return cursor

    return drop, create_collection, list_collections, list_collection_names, aggregate


(Database.drop, Database.create_collection, Database.list_collections,
 Database.list_collection_names, Database.aggregate) = _database_methods()


def _session_ptr(session, client):
    if session is None:
        return None
    if not isinstance(session, ClientSession):
        raise InvalidOperation(f"session must be a ClientSession, not {type(session).__name__}")
    if session.client is not client:
        raise InvalidOperation("the session belongs to another client")
    return session._live()


class Collection:
    """A collection: CRUD and queries. Results are the ABI's result documents."""

    def __init__(self, database, name):
        self.database = database
        self.name = name
        self._name = name_bytes(name, "collection name")

    def _args(self, session):
        client = self.database.client
        return client._live(), _session_ptr(session, client), self.database._name, self._name

    def insert_one(self, document, session=None):
        """Inserts one document; {"insertedId": ...}."""
        data, o = encode(document), _options_bson()
        result = _ffi.MiBuffer()
        check(lib.mi_insert_one(*self._args(session), data, len(data), o, size(o),
                                C.byref(result)))
        return take_buffer(result)

    def insert_many(self, documents, session=None):
        """Inserts every document, in batches; {"insertedIds": {"0": id, ...}}."""
        pointers, lengths, count, _keep = _ffi.document_array(list(documents), "document")
        result, o = _ffi.MiBuffer(), _options_bson()
        check(lib.mi_insert_many(*self._args(session), pointers, lengths, count, o, size(o),
                                 C.byref(result)))
        return take_buffer(result)

    def _update(self, function, filter, update, upsert, session):
        f, u = encode(filter, "filter"), encode(update, "update")
        options = _options_bson({"upsert": bool(upsert)} if upsert is not None else None)
        result = _ffi.MiBuffer()
        check(function(*self._args(session), f, len(f), u, len(u), options, size(options),
                       C.byref(result)))
        return take_buffer(result)

    def update_one(self, filter, update, upsert=None, session=None):
        """Updates the first match; {"matchedCount", "modifiedCount", "upsertedId"?}."""
        return self._update(lib.mi_update_one, filter, update, upsert, session)

    def update_many(self, filter, update, upsert=None, session=None):
        """Updates every match; {"matchedCount", "modifiedCount", "upsertedId"?}."""
        return self._update(lib.mi_update_many, filter, update, upsert, session)

    def _delete(self, function, filter, session):
        f, o = encode(filter, "filter"), _options_bson()
        result = _ffi.MiBuffer()
        check(function(*self._args(session), f, len(f), o, size(o), C.byref(result)))
        return take_buffer(result)

    def delete_one(self, filter, session=None):
        """Deletes the first match; {"deletedCount"}."""
        return self._delete(lib.mi_delete_one, filter, session)

    def delete_many(self, filter, session=None):
        """Deletes every match; {"deletedCount"}."""
        return self._delete(lib.mi_delete_many, filter, session)

    def count_documents(self, filter, limit=None, skip=None, session=None):
        """How many documents match."""
        f = encode(filter, "filter")
        options = _options(limit=limit, skip=skip)
        count = C.c_uint64()
        check(lib.mi_count_documents(*self._args(session), f, len(f), options, size(options),
                                     C.byref(count)))
        return count.value

    def find(self, filter=None, projection=None, sort=None, limit=None, skip=None,
             batch_size=None, session=None):
        """A Cursor over the matches (fetched a batch at a time)."""
        f = encode(filter if filter is not None else {}, "filter")
        options = _options(projection=projection, sort=sort, limit=limit, skip=skip,
                           batchSize=batch_size)
        cursor = Cursor(self.database.client)
        check(lib.mi_find(*self._args(session), f, len(f), options, size(options),
                          C.byref(cursor._ptr)))
        return cursor

    def find_one(self, filter=None, projection=None, sort=None, skip=None, session=None):
        """The first match, or None."""
        with self.find(filter, projection=projection, sort=sort, skip=skip, limit=-1,
                       session=session) as cursor:
            return next(cursor, None)

    def aggregate(self, pipeline, batch_size=None, allow_disk_use=None, session=None):
        """A Cursor over the pipeline's results."""
        pointers, lengths, count, _keep = _ffi.document_array(list(pipeline), "pipeline stage")
        options = _options(batchSize=batch_size, allowDiskUse=allow_disk_use)
        cursor = Cursor(self.database.client)
        check(lib.mi_aggregate(*self._args(session), pointers, lengths, count, options,
                               size(options), C.byref(cursor._ptr)))
        return cursor


def _collection_methods():
    """Collection's operations beyond CRUD and find, options by their official
    names (an unknown one is an ArgumentError from the library)."""

    def with_result(function, collection, session, *arguments):
        out = _ffi.MiBuffer()
        check(function(*collection._args(session), *arguments, C.byref(out)))
        return take_buffer(out)

    def replace_one(self, filter, replacement, options=None, session=None):
        """Replaces the first match; {"matchedCount", "modifiedCount", "upsertedId"?}."""
        f, r, o = encode(filter, "filter"), encode(replacement), _options_bson(options)
        return with_result(lib.mi_replace_one, self, session, f, len(f), r, len(r), o, size(o))

    def find_one_and_update(self, filter, update, options=None, session=None):
        """Updates the first match; it as it was (returnDocument: "after": as it is), or None."""
        f, u, o = encode(filter, "filter"), encode(update, "update"), _options_bson(options)
        return with_result(lib.mi_find_one_and_update, self, session, f, len(f), u, len(u), o,
                           size(o))

    def find_one_and_replace(self, filter, replacement, options=None, session=None):
        """Replaces the first match; returned as find_one_and_update does."""
        f, r, o = encode(filter, "filter"), encode(replacement), _options_bson(options)
        return with_result(lib.mi_find_one_and_replace, self, session, f, len(f), r, len(r), o,
                           size(o))

    def find_one_and_delete(self, filter, options=None, session=None):
        """Deletes the first match and returns it, or None."""
        f, o = encode(filter, "filter"), _options_bson(options)
        return with_result(lib.mi_find_one_and_delete, self, session, f, len(f), o, size(o))

    def distinct(self, key, filter=None, options=None, session=None):
        """The distinct values of `key` among the matches."""
        f, o = encode(filter if filter is not None else {}, "filter"), _options_bson(options)
        return with_result(lib.mi_distinct, self, session, name_bytes(key, "key"), f, len(f), o,
                           size(o))["values"]

    def estimated_document_count(self, options=None, session=None):
        """The collection's count from its metadata."""
        o = _options_bson(options)
        count = C.c_uint64()
        check(lib.mi_estimated_document_count(*self._args(session), o, size(o), C.byref(count)))
        return count.value

    def bulk_write(self, requests, options=None, session=None):
        """Runs write models ({"insertOne": {"document": ...}}, {"updateOne": {...}}, ...)."""
        pointers, lengths, count, _keep = _ffi.document_array(list(requests), "write model")
        o = _options_bson(options)
        return with_result(lib.mi_bulk_write, self, session, pointers, lengths, count, o, size(o))

    def create_indexes(self, indexes, options=None, session=None):
        """Creates indexes ({"key": {...}, "name"?...}); their names."""
        pointers, lengths, count, _keep = _ffi.document_array(list(indexes), "index model")
        o = _options_bson(options)
        return with_result(lib.mi_create_indexes, self, session, pointers, lengths, count, o,
                           size(o))["indexNames"]

    def create_index(self, keys, options=None, session=None):
        """Creates one index on `keys` ({"field": 1}); its name. options: the index's (name,
        unique...)."""
        return self.create_indexes([{"key": keys, **(options or {})}], session=session)[0]

    def list_indexes(self, options=None, session=None):
        """A Cursor over the index specifications."""
        o = _options_bson(options)
        cursor = Cursor(self.database.client)
        check(lib.mi_list_indexes(*self._args(session), o, size(o), C.byref(cursor._ptr)))
        return cursor

    def index_names(self, session=None):
        """The index names."""
        o = _options_bson()
        return with_result(lib.mi_list_index_names, self, session, o, size(o))["names"]

    def drop_index(self, name, options=None, session=None):
        """Drops the index called `name`."""
        o = _options_bson(options)
        check(lib.mi_drop_index(*self._args(session), name_bytes(name, "index name"), o, size(o)))

    def drop_indexes(self, options=None, session=None):
        """Drops every index but _id's."""
        o = _options_bson(options)
        check(lib.mi_drop_indexes(*self._args(session), o, size(o)))

    def drop(self, options=None, session=None):
        """Drops the collection (no error if it does not exist)."""
        o = _options_bson(options)
        check(lib.mi_drop_collection(*self._args(session), o, size(o)))

    return (replace_one, find_one_and_update, find_one_and_replace, find_one_and_delete,
            distinct, estimated_document_count, bulk_write, create_indexes, create_index,
            list_indexes, index_names, drop_index, drop_indexes, drop)


def _search_index_methods():
    """Atlas Search index management, as PyMongo names it. A model is
    {"definition": {...}, "name"?: str, "type"?: "search" | "vectorSearch"}.
    A deployment without Atlas Search refuses each command: a CommandError
    with the server's code (115, CommandNotSupported). The library takes no
    timeoutMS for these: inside a `timeout` block they raise ArgumentError."""

    def create_search_indexes(self, models, session=None):
        """Creates search indexes; their names, in order."""
        pointers, lengths, count, _keep = _ffi.document_array(list(models), "search index model")
        o, out = _options_bson(), _ffi.MiBuffer()
        check(lib.mi_create_search_indexes(*self._args(session), pointers, lengths, count, o,
                                           size(o), C.byref(out)))
        return take_buffer(out)["indexNames"]

    def create_search_index(self, model, session=None):
        """Creates one search index; its name."""
        return self.create_search_indexes([model], session=session)[0]

    def update_search_index(self, name, definition, session=None):
        """Replaces the definition of the search index `name`."""
        d, o = encode(definition, "definition"), _options_bson()
        check(lib.mi_update_search_index(*self._args(session), name_bytes(name, "index name"), d,
                                         len(d), o, size(o)))

    def drop_search_index(self, name, session=None):
        """Drops the search index `name` (no error if it does not exist)."""
        o = _options_bson()
        check(lib.mi_drop_search_index(*self._args(session), name_bytes(name, "index name"), o,
                                       size(o)))

    def list_search_indexes(self, name=None, options=None, session=None):
        """A Cursor over the search indexes (only `name`'s when given);
        options are the aggregation's (batchSize, comment...)."""
        given = dict(options or {})
        if name is not None:
            given["name"] = name
        o = _options_bson(given or None)
        cursor = Cursor(self.database.client)
        check(lib.mi_list_search_indexes(*self._args(session), o, size(o), C.byref(cursor._ptr)))
        return cursor

    return (create_search_indexes, create_search_index, update_search_index, drop_search_index,
            list_search_indexes)


def _options(**options):
    """The options given (not None) as BSON, or None for none."""
    given = {k: v for k, v in options.items() if v is not None}
    return _options_bson(given or None)


for _method in _collection_methods() + _search_index_methods():
    setattr(Collection, _method.__name__, _method)


class Cursor(_Handle):
    """An iterator over query results; fetches the next batch when one runs out."""

    _kind = "cursor"

    def __init__(self, client):
        super().__init__()
        self.client = client  # the library keeps the client's state alive too
        self._exhausted = False

    @staticmethod
    def _free(ptr):
        lib.mi_cursor_free(ptr)

    def __iter__(self):
        return self

    def __next__(self):
        if self._exhausted:
            raise StopIteration
        ptr = self._live()
        document, length = C.c_void_p(), C.c_size_t()
        check(lib.mi_cursor_next(ptr, C.byref(document), C.byref(length)))
        if not document.value:
            self._exhausted = True
            self.close()
            raise StopIteration
        return bson.decode(C.string_at(document.value, length.value))

    def to_list(self):
        """Every remaining document."""
        return list(self)


class ClientSession(_Handle):
    """An explicit session: causal consistency and transactions."""

    _kind = "session"

    def __init__(self, client, options):
        super().__init__()
        self.client = client
        check(lib.mi_session_start(client._live(), options, size(options), C.byref(self._ptr)))

    @staticmethod
    def _free(ptr):
        lib.mi_session_free(ptr)

    _lent = False  # inside with_transaction's callback

    def close(self):
        """Ends the session (aborting an open transaction); a second call does nothing."""
        if self._lent:
            raise InvalidOperation("a session cannot be closed inside its with_transaction callback")
        super().close()

    def end_session(self):
        """Ends the session (aborting an open transaction); as close()."""
        self.close()

    @property
    def session_id(self):
        """The session's lsid as a dict ({"id": UUID})."""
        out = _ffi.MiBuffer()
        check(lib.mi_session_id(self._live(), C.byref(out)))
        return take_buffer(out)

    def start_transaction(self, read_concern=None, write_concern=None, max_commit_time_ms=None):
        """Starts a transaction; the session's next operation begins it."""
        # It sends nothing, so a `timeout` block has nothing to bound here.
        given = {"readConcern": read_concern, "writeConcern": write_concern,
                 "maxCommitTimeMS": max_commit_time_ms}
        options = encode({k: v for k, v in given.items() if v is not None} or None, "options")
        check(lib.mi_session_start_transaction(self._live(), options, size(options)))

    def commit_transaction(self):
        """Commits the transaction (InvalidOperation if none was started)."""
        options = _options_bson()
        check(lib.mi_session_commit_transaction(self._live(), options, size(options)))

    def abort_transaction(self):
        """Aborts the transaction (InvalidOperation if none was started)."""
        options = _options_bson()
        check(lib.mi_session_abort_transaction(self._live(), options, size(options)))

    def with_transaction(self, callback, read_concern=None, write_concern=None,
                         max_commit_time_ms=None):
        """Runs callback(session) in a transaction, with the driver's retry loop
        (TransientTransactionError and UnknownTransactionCommitResult retried
        within 120 s); an exception raised by callback aborts and propagates.
        Returns what callback returned."""
        from ._transaction import with_transaction

        return with_transaction(self, callback, _options(
            readConcern=read_concern, writeConcern=write_concern,
            maxCommitTimeMS=max_commit_time_ms))
