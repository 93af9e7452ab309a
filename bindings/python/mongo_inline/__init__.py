"""mongo-inline for Python: a single-threaded MongoDB driver for short-lived
processes, over the library's C ABI (ctypes). Documents are dicts, through
the `bson` package that PyMongo ships.

    from mongo_inline import Client
    with Client("mongodb://127.0.0.1:27017/") as client:
        people = client["app"]["people"]
        people.insert_one({"name": "Ada"})
        print(people.find_one({"name": "Ada"}))
"""

from ._ffi import lib as _lib
from .client import Client, ClientSession, Collection, Cursor, Database, timeout
from .errors import (
    ArgumentError,
    AuthenticationError,
    CommandError,
    IncompatibleServer,
    InternalError,
    InvalidDocument,
    InvalidOperation,
    MongoInlineError,
    NetworkError,
    OperationTimeout,
    ProtocolError,
    ServerSelectionError,
    TLSError,
    WriteError,
)

__version__ = _lib.mi_version().decode()

__all__ = [
    "Client", "ClientSession", "Collection", "Cursor", "Database", "ArgumentError",
    "AuthenticationError", "CommandError", "IncompatibleServer", "InternalError",
    "InvalidDocument", "InvalidOperation", "MongoInlineError", "NetworkError",
    "OperationTimeout", "ProtocolError", "ServerSelectionError", "TLSError", "WriteError",
    "timeout",
]
