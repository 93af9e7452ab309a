#!/usr/bin/env python3
"""mongo-inline from Python through ctypes and the C ABI (include/mongo_inline.h).

    cargo rustc --release --lib --features capi --crate-type cdylib --crate-type staticlib
    python3 examples/python/mongo_inline_ctypes.py 'mongodb://127.0.0.1:27017/' \
        target/release/libmongo_inline.so

BSON crosses as bytes; this script uses the library's Extended JSON helpers
instead of a BSON package, so it needs nothing beyond the standard library.
Exits non-zero if anything fails.
"""

import ctypes as C
import json
import sys


class MiError(C.Structure):
    _fields_ = [
        ("domain", C.c_int32),
        ("code", C.c_int32),
        ("message", C.c_char_p),
        ("labels", C.POINTER(C.c_char_p)),
        ("label_count", C.c_size_t),
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


EVENT_CALLBACK = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(MiEvent))
ERR = C.POINTER(MiError)
P = C.c_void_p  # opaque handles


class MongoInlineError(Exception):
    def __init__(self, err):
        e = err.contents
        self.domain, self.code = e.domain, e.code
        self.labels = [e.labels[i].decode() for i in range(e.label_count)]
        super().__init__(f"{e.message.decode()} (domain {e.domain}, code {e.code})")


class Library:
    """The C functions, with their signatures declared."""

    def __init__(self, path):
        lib = C.CDLL(path)
        sigs = {
            "mi_version": (C.c_char_p, []),
            "mi_error_free": (None, [ERR]),
            "mi_error_has_label": (C.c_bool, [ERR, C.c_char_p]),
            "mi_buffer_free": (None, [C.POINTER(MiBuffer)]),
            "mi_string_free": (None, [C.c_void_p]),
            "mi_bson_from_json": (ERR, [C.c_char_p, C.POINTER(MiBuffer)]),
            "mi_bson_to_json": (ERR, [C.c_void_p, C.c_size_t, C.POINTER(C.c_void_p)]),
            "mi_client_new": (ERR, [C.c_char_p, C.POINTER(P)]),
            "mi_client_free": (None, [P]),
            "mi_client_set_event_callback": (ERR, [P, EVENT_CALLBACK, C.c_void_p]),
            "mi_client_retry_tokens": (ERR, [P, C.POINTER(C.c_double), C.POINTER(C.c_bool)]),
            "mi_client_run_command": (ERR, [P, P, C.c_char_p, C.c_void_p, C.c_size_t,
                                            C.POINTER(MiBuffer)]),
            "mi_insert_one": (ERR, [P, P, C.c_char_p, C.c_char_p, C.c_void_p, C.c_size_t,
                                    C.c_void_p, C.c_size_t, C.POINTER(MiBuffer)]),
            "mi_find": (ERR, [P, P, C.c_char_p, C.c_char_p, C.c_void_p, C.c_size_t, C.c_void_p,
                              C.c_size_t, C.POINTER(P)]),
            "mi_cursor_next": (ERR, [P, C.POINTER(C.c_void_p), C.POINTER(C.c_size_t)]),
            "mi_cursor_free": (None, [P]),
            "mi_count_documents": (ERR, [P, P, C.c_char_p, C.c_char_p, C.c_void_p, C.c_size_t,
                                         C.c_void_p, C.c_size_t, C.POINTER(C.c_uint64)]),
            "mi_session_start": (ERR, [P, C.c_void_p, C.c_size_t, C.POINTER(P)]),
            "mi_session_free": (None, [P]),
            "mi_session_start_transaction": (ERR, [P, C.c_void_p, C.c_size_t]),
            "mi_session_commit_transaction": (ERR, [P, C.c_void_p, C.c_size_t]),
        }
        for name, (restype, argtypes) in sigs.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        self.lib = lib

    def check(self, err):
        if err:
            exc = MongoInlineError(err)
            self.lib.mi_error_free(err)
            raise exc

    def bson(self, obj):
        """A Python object -> BSON bytes (through Extended JSON)."""
        buf = MiBuffer()
        self.check(self.lib.mi_bson_from_json(json.dumps(obj).encode(), C.byref(buf)))
        try:
            return C.string_at(buf.data, buf.len)
        finally:
            self.lib.mi_buffer_free(C.byref(buf))

    def to_python(self, data, length):
        """BSON bytes at a pointer -> a Python object (relaxed Extended JSON)."""
        out = C.c_void_p()
        self.check(self.lib.mi_bson_to_json(data, length, C.byref(out)))
        try:
            return json.loads(C.string_at(out.value).decode())
        finally:
            self.lib.mi_string_free(out)

    def buffer_to_python(self, buf):
        try:
            return self.to_python(buf.data, buf.len)
        finally:
            self.lib.mi_buffer_free(C.byref(buf))


def main():
    uri = sys.argv[1] if len(sys.argv) > 1 else "mongodb://127.0.0.1:27017/"
    path = sys.argv[2] if len(sys.argv) > 2 else "target/release/libmongo_inline.so"
    mi = Library(path)
    lib = mi.lib
    print("mongo-inline", lib.mi_version().decode())

    # A bad URI is an error, not a crash.
    bad = P()
    try:
        mi.check(lib.mi_client_new(b"mongodb://host:notaport/", C.byref(bad)))
        raise SystemExit("a bad URI was accepted")
    except MongoInlineError as e:
        print("bad URI refused:", e)

    client = P()
    mi.check(lib.mi_client_new(uri.encode(), C.byref(client)))
    started = []

    commits = []

    @EVENT_CALLBACK
    def on_event(_user_data, event):
        e = event.contents
        if e.kind == 1:
            started.append(e.command_name.decode())
            if e.command_name == b"commitTransaction":
                commits.append(mi.to_python(e.document, e.document_len))

    mi.check(lib.mi_client_set_event_callback(client, on_event, None))
    try:
        reply = MiBuffer()
        ping = mi.bson({"ping": 1})
        mi.check(lib.mi_client_run_command(client, None, b"admin", ping, len(ping), C.byref(reply)))
        assert mi.buffer_to_python(reply)["ok"] == 1

        drop = mi.bson({"drop": "ctypes"})
        err = lib.mi_client_run_command(client, None, b"example", drop, len(drop), C.byref(reply))
        if err:
            lib.mi_error_free(err)  # the collection may not exist yet
        else:
            lib.mi_buffer_free(C.byref(reply))

        session = P()
        mi.check(lib.mi_session_start(client, None, 0, C.byref(session)))
        try:
            txn = mi.bson({"writeConcern": {"w": "majority"}, "maxCommitTimeMS": 5000})
            mi.check(lib.mi_session_start_transaction(session, txn, len(txn)))
            for name in ("Ada", "Grace", "Katherine"):
                doc = mi.bson({"name": name, "len": len(name)})
                result = MiBuffer()
                mi.check(lib.mi_insert_one(client, session, b"example", b"ctypes", doc, len(doc),
                                           None, 0, C.byref(result)))
                assert "insertedId" in mi.buffer_to_python(result)
            mi.check(lib.mi_session_commit_transaction(session, None, 0))
        finally:
            lib.mi_session_free(session)

        cursor = P()
        flt = mi.bson({"len": {"$gt": 3}})
        opts = mi.bson({"sort": {"name": 1}, "projection": {"_id": 0, "name": 1}})
        mi.check(lib.mi_find(client, None, b"example", b"ctypes", flt, len(flt), opts, len(opts),
                             C.byref(cursor)))
        names = []
        try:
            doc, length = C.c_void_p(), C.c_size_t()
            while True:
                mi.check(lib.mi_cursor_next(cursor, C.byref(doc), C.byref(length)))
                if not doc.value:
                    break
                names.append(mi.to_python(doc, length)["name"])
        finally:
            lib.mi_cursor_free(cursor)
        print("found:", names)
        assert names == ["Grace", "Katherine"], names

        count = C.c_uint64()
        everything = mi.bson({})
        mi.check(lib.mi_count_documents(client, None, b"example", b"ctypes", everything,
                                        len(everything), None, 0, C.byref(count)))
        assert count.value == 3, count.value

        # A duplicate key: the error's domain and code tell it apart.
        dup = mi.bson({"_id": 7})
        result = MiBuffer()
        mi.check(lib.mi_insert_one(client, None, b"example", b"ctypes", dup, len(dup),
                                   None, 0, C.byref(result)))
        lib.mi_buffer_free(C.byref(result))
        try:
            mi.check(lib.mi_insert_one(client, None, b"example", b"ctypes", dup, len(dup),
                                       None, 0, C.byref(result)))
            raise SystemExit("a duplicate key was accepted")
        except MongoInlineError as e:
            assert (e.domain, e.code) == (4, 11000), e
            print("duplicate key refused, code", e.code)

        tokens, has_bucket = C.c_double(), C.c_bool()
        mi.check(lib.mi_client_retry_tokens(client, C.byref(tokens), C.byref(has_bucket)))
        print(f"commands started: {len(started)}; retry tokens: {tokens.value}")
        assert "insert" in started and "commitTransaction" in started, started
        # The transaction's options reached the server with the commit.
        assert commits and commits[0]["writeConcern"]["w"] == "majority", commits
        assert commits[0]["maxTimeMS"] == 5000, commits
    finally:
        lib.mi_client_free(client)
    print("ok")


if __name__ == "__main__":
    main()
