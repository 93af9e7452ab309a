"""Exceptions: one class per mi_error domain, all under MongoInlineError.

Every error the library returns carries the domain, the server's code (0 if
none) and the error labels, so `except WriteError as e: e.code == 11000` and
`e.has_error_label("TransientTransactionError")` work as in PyMongo.
"""


class MongoInlineError(Exception):
    """Any failure of the driver or of this binding."""

    domain = 0

    def __init__(self, message, code=0, labels=()):
        super().__init__(message)
        self.message = message
        self.code = code
        self.labels = tuple(labels)
        # What else the library reported, as a dict (a client bulk write's
        # writeErrors, writeConcernErrors and partialResult), or None.
        self.details = None

    def has_error_label(self, label):
        """Whether the error carries `label` (e.g. "RetryableWriteError")."""
        return label in self.labels

    def __str__(self):
        parts = [self.message]
        if self.code:
            parts.append(f"code {self.code}")
        if self.labels:
            parts.append("labels " + ", ".join(self.labels))
        return parts[0] if len(parts) == 1 else f"{parts[0]} ({'; '.join(parts[1:])})"


class ArgumentError(MongoInlineError, ValueError):
    """An invalid argument: bad URI, bad option, invalid name, unusable TLS file."""

    domain = 1


class InvalidDocument(ArgumentError):
    """A document (or a value in it) that BSON cannot hold."""


class NetworkError(MongoInlineError):
    """A socket failed or could not be opened, or a mongodb+srv look-up failed."""

    domain = 2


class CommandError(MongoInlineError):
    """The server answered ok: 0; `code` is its error code."""

    domain = 3


class WriteError(MongoInlineError):
    """A write statement or the write concern failed; `code` is the server's."""

    domain = 4


class ServerSelectionError(MongoInlineError):
    """No suitable server within serverSelectionTimeoutMS."""

    domain = 5


class OperationTimeout(MongoInlineError, TimeoutError):
    """The operation's timeoutMS passed."""

    domain = 6


class ProtocolError(MongoInlineError):
    """The server's reply broke the wire protocol."""

    domain = 7


class AuthenticationError(MongoInlineError):
    """Authentication failed."""

    domain = 8


class TLSError(MongoInlineError):
    """A TLS handshake or certificate check failed."""

    domain = 9


class IncompatibleServer(MongoInlineError):
    """The server's wire versions do not overlap the driver's."""

    domain = 10


class InvalidOperation(MongoInlineError):
    """The call does not fit the state: a closed handle, a commit without a
    transaction, a parent's cursor used in a forked child."""

    domain = 11


class InternalError(MongoInlineError):
    """A bug in the library (a panic it caught)."""

    domain = 12


BY_DOMAIN = {
    cls.domain: cls
    for cls in (
        ArgumentError,
        NetworkError,
        CommandError,
        WriteError,
        ServerSelectionError,
        OperationTimeout,
        ProtocolError,
        AuthenticationError,
        TLSError,
        IncompatibleServer,
        InvalidOperation,
        InternalError,
    )
}
