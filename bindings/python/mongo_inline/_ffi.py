"""The C library, loaded once, with every function's signature declared.

The library is found through MONGO_INLINE_LIB (a path), else beside this
package (a wheel that carries it), else by the loader's search path.
"""

import ctypes as C
import os

import bson

from .errors import BY_DOMAIN, ArgumentError, InvalidDocument, MongoInlineError


class MiError(C.Structure):
    _fields_ = [
        ("domain", C.c_int32),
        ("code", C.c_int32),
        ("message", C.c_char_p),
        ("labels", C.POINTER(C.c_char_p)),
        ("label_count", C.c_size_t),
        ("details", C.POINTER(C.c_uint8)),
        ("details_len", C.c_size_t),
    ]


class MiBuffer(C.Structure):
    _fields_ = [("data", C.POINTER(C.c_uint8)), ("len", C.c_size_t)]


class MiEvent(C.Structure):
    _fields_ = [
        ("kind", C.c_int32),
        ("command_name", C.c_char_p),
        ("database_name", C.c_char_p),
        ("request_id", C.c_int32),
        ("duration_micros", C.c_int64),
        ("server_address", C.c_char_p),
        ("document", C.POINTER(C.c_uint8)),
        ("document_len", C.c_size_t),
        ("message", C.c_char_p),
    ]


ERR = C.POINTER(MiError)
HANDLE = C.c_void_p
BYTES = C.c_char_p  # BSON in: Python bytes pass without a copy
SIZE = C.c_size_t
STR = C.c_char_p
BUF = C.POINTER(MiBuffer)
EVENT_CALLBACK = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(MiEvent))
# Returns an mi_error* as a plain address (0: commit): ctypes cannot return
# a POINTER type from a callback.
TRANSACTION_CALLBACK = C.CFUNCTYPE(C.c_void_p, C.c_void_p, C.c_void_p)

# name: (result type, argument types). Functions a library build may not
# have yet are declared when present (see `has`).
_SIGNATURES = {
    "mi_version": (C.c_char_p, []),
    "mi_error_free": (None, [ERR]),
    "mi_buffer_free": (None, [BUF]),
    "mi_client_new": (ERR, [STR, C.POINTER(HANDLE)]),
    "mi_client_free": (None, [HANDLE]),
    "mi_client_set_event_callback": (ERR, [HANDLE, EVENT_CALLBACK, C.c_void_p]),
    "mi_client_run_command": (ERR, [HANDLE, HANDLE, STR, BYTES, SIZE, BUF]),
    "mi_run_command": (ERR, [HANDLE, HANDLE, STR, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_session_start": (ERR, [HANDLE, BYTES, SIZE, C.POINTER(HANDLE)]),
    "mi_session_free": (None, [HANDLE]),
    "mi_session_id": (ERR, [HANDLE, BUF]),
    "mi_session_start_transaction": (ERR, [HANDLE, BYTES, SIZE]),
    "mi_session_commit_transaction": (ERR, [HANDLE, BYTES, SIZE]),
    "mi_session_abort_transaction": (ERR, [HANDLE, BYTES, SIZE]),
    "mi_session_with_transaction": (ERR, [HANDLE, TRANSACTION_CALLBACK, C.c_void_p, BYTES, SIZE]),
    "mi_error_new": (C.c_void_p, [C.c_int32, C.c_int32, STR]),
    "mi_insert_one": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_insert_many": (
        ERR,
        [HANDLE, HANDLE, STR, STR, C.POINTER(C.c_char_p), C.POINTER(SIZE), SIZE, BYTES, SIZE, BUF],
    ),
    "mi_update_one": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_update_many": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_delete_one": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_delete_many": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_count_documents": (
        ERR,
        [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, C.POINTER(C.c_uint64)],
    ),
    "mi_find": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, C.POINTER(HANDLE)]),
    "mi_aggregate": (
        ERR,
        [HANDLE, HANDLE, STR, STR, C.POINTER(C.c_char_p), C.POINTER(SIZE), SIZE, BYTES, SIZE,
         C.POINTER(HANDLE)],
    ),
    "mi_replace_one": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_find_one_and_update": (
        ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_find_one_and_replace": (
        ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_find_one_and_delete": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_distinct": (ERR, [HANDLE, HANDLE, STR, STR, STR, BYTES, SIZE, BYTES, SIZE, BUF]),
    "mi_estimated_document_count": (
        ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, C.POINTER(C.c_uint64)]),
    "mi_bulk_write": (
        ERR,
        [HANDLE, HANDLE, STR, STR, C.POINTER(C.c_char_p), C.POINTER(SIZE), SIZE, BYTES, SIZE, BUF],
    ),
    "mi_create_indexes": (
        ERR,
        [HANDLE, HANDLE, STR, STR, C.POINTER(C.c_char_p), C.POINTER(SIZE), SIZE, BYTES, SIZE, BUF],
    ),
    "mi_list_indexes": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, C.POINTER(HANDLE)]),
    "mi_list_index_names": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, BUF]),
    "mi_drop_index": (ERR, [HANDLE, HANDLE, STR, STR, STR, BYTES, SIZE]),
    "mi_drop_indexes": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE]),
    "mi_drop_collection": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE]),
    "mi_create_search_indexes": (
        ERR,
        [HANDLE, HANDLE, STR, STR, C.POINTER(C.c_char_p), C.POINTER(SIZE), SIZE, BYTES, SIZE, BUF],
    ),
    "mi_update_search_index": (ERR, [HANDLE, HANDLE, STR, STR, STR, BYTES, SIZE, BYTES, SIZE]),
    "mi_drop_search_index": (ERR, [HANDLE, HANDLE, STR, STR, STR, BYTES, SIZE]),
    "mi_list_search_indexes": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE, C.POINTER(HANDLE)]),
    "mi_create_collection": (ERR, [HANDLE, HANDLE, STR, STR, BYTES, SIZE]),
    "mi_drop_database": (ERR, [HANDLE, HANDLE, STR, BYTES, SIZE]),
    "mi_list_collections": (ERR, [HANDLE, HANDLE, STR, BYTES, SIZE, C.POINTER(HANDLE)]),
    "mi_list_collection_names": (ERR, [HANDLE, HANDLE, STR, BYTES, SIZE, BUF]),
    "mi_database_aggregate": (
        ERR,
        [HANDLE, HANDLE, STR, C.POINTER(C.c_char_p), C.POINTER(SIZE), SIZE, BYTES, SIZE,
         C.POINTER(HANDLE)],
    ),
    "mi_list_databases": (ERR, [HANDLE, HANDLE, BYTES, SIZE, BUF]),
    "mi_list_database_names": (ERR, [HANDLE, HANDLE, BYTES, SIZE, BUF]),
    "mi_client_bulk_write": (
        ERR, [HANDLE, HANDLE, C.POINTER(C.c_char_p), C.POINTER(SIZE), SIZE, BYTES, SIZE, BUF]),
    "mi_cursor_next": (ERR, [HANDLE, C.POINTER(C.c_void_p), C.POINTER(SIZE)]),
    "mi_cursor_free": (None, [HANDLE]),
}


def _library_path():
    explicit = os.environ.get("MONGO_INLINE_LIB")
    if explicit:
        return explicit
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libmongo_inline.so")
    if os.path.exists(beside):
        return beside
    return "libmongo_inline.so"


def _load():
    path = _library_path()
    try:
        lib = C.CDLL(path)
    except OSError as exc:
        raise ImportError(
            f"mongo_inline: cannot load the C library {path!r} ({exc}); set MONGO_INLINE_LIB "
            "to the path of libmongo_inline.so (cargo rustc --release --lib --features capi "
            "--crate-type cdylib)"
        ) from exc
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name, None)
        if function is not None:
            function.restype, function.argtypes = restype, argtypes
    return lib


lib = _load()


def has(name):
    """Whether the loaded library exports `name`."""
    return hasattr(lib, name)


class _RawError:
    """An mi_error kept with its exception, so that a transaction callback
    can hand the very error (labels and all) back to the library's retry
    loop; freed with the exception unless handed over."""

    __slots__ = ("address",)

    def __init__(self, address):
        self.address = address

    def take(self):
        """The error's address, now the caller's to hand over (0 if taken)."""
        address, self.address = self.address, 0
        return address

    def __del__(self):
        address = self.take()
        if address:
            lib.mi_error_free(C.cast(address, ERR))


def check(error):
    """Raises the exception for an mi_error (which it then owns); no-op on NULL."""
    if not error:
        return
    e = error.contents
    message = e.message.decode("utf-8", "replace")
    labels = [e.labels[i].decode("utf-8", "replace") for i in range(e.label_count)]
    cls = BY_DOMAIN.get(e.domain, MongoInlineError)
    exc = cls(message, e.code, labels)
    if e.details:
        exc.details = bson.decode(C.string_at(e.details, e.details_len))
    exc._raw = _RawError(C.cast(error, C.c_void_p).value)
    raise exc


def encode(document, what="document"):
    """A mapping -> BSON bytes; None stays None (the ABI's "no options")."""
    if document is None:
        return None
    if isinstance(document, (bytes, bytearray)):
        return bytes(document)
    try:
        return bson.encode(document)
    except (bson.errors.InvalidDocument, OverflowError, TypeError, ValueError) as exc:
        raise InvalidDocument(f"{what} cannot be encoded as BSON: {exc}") from exc


def size(data):
    return len(data) if data is not None else 0


def take_buffer(buffer):
    """The document in an mi_buffer the library filled, as a dict (None when
    the library left it empty: no document); frees it."""
    if not buffer.data:
        return None
    try:
        return bson.decode(C.string_at(buffer.data, buffer.len))
    finally:
        lib.mi_buffer_free(C.byref(buffer))


def name_bytes(name, what):
    if not isinstance(name, str):
        raise ArgumentError(f"{what} must be a str, not {type(name).__name__}")
    if "\0" in name:
        raise ArgumentError(f"{what} {name!r} contains a NUL character")
    return name.encode("utf-8")


def document_array(documents, what):
    """A list of mappings -> (char*[], size_t[], count, keepalive) for the ABI."""
    encoded = [encode(d, what) for d in documents]
    count = len(encoded)
    pointers = (C.c_char_p * count)(*encoded)
    lengths = (SIZE * count)(*[len(e) for e in encoded])
    return pointers, lengths, count, encoded


__all__ = ["lib", "has", "check", "MongoInlineError"]
