"""with_transaction over the C ABI's retry loop (mi_session_with_transaction).

The library runs the loop: it calls back into Python for the transaction's
body, retries the whole transaction on a TransientTransactionError label and
the commit on UnknownTransactionCommitResult. An exception cannot cross C:
the callback catches it, keeps it, and returns an mi_error instead (the
library's own error as it was, labels and all, so that its labels decide
retries; a new one for any other exception), and the exception is raised
again once the library returns.
"""

from . import _ffi
from .errors import InvalidOperation, MongoInlineError

_CLIENT_DOMAIN = InvalidOperation.domain


def with_transaction(session, callback, options):
    from .client import _DEADLINE

    if not _ffi.has("mi_session_with_transaction"):
        raise InvalidOperation(
            "with_transaction needs mi_session_with_transaction, which this build of "
            "libmongo_inline does not export; use start_transaction/commit_transaction"
        )
    outcome = {}

    def body(_user_data, _session_ptr):
        outcome.pop("exception", None)
        # The library bounds the callback's operations by the transaction's
        # own timeoutMS; they may not set one of their own.
        no_deadline = _DEADLINE.set(None)
        try:
            outcome["value"] = callback(session)
            return None
        except BaseException as exc:  # noqa: BLE001 - carried across C, raised below
            outcome["exception"] = exc
            return _error_for(exc)
        finally:
            _DEADLINE.reset(no_deadline)

    trampoline = _ffi.TRANSACTION_CALLBACK(body)
    session._lent = True
    try:
        error = _ffi.lib.mi_session_with_transaction(
            session._live(), trampoline, None, options, _ffi.size(options))
    finally:
        session._lent = False
    exception = outcome.pop("exception", None)
    if error and exception is not None:
        # The last attempt's callback failed: its own exception, not the
        # library's copy of it.
        _ffi.lib.mi_error_free(error)
        raise exception
    _ffi.check(error)
    return outcome.get("value")


def _error_for(exc):
    """The mi_error to return for `exc`: the library's own if it is one."""
    raw = getattr(exc, "_raw", None)
    if raw is not None:
        address = raw.take()
        if address:
            return address
    if isinstance(exc, MongoInlineError):
        domain, code = exc.domain or _CLIENT_DOMAIN, exc.code
    else:
        domain, code = _CLIENT_DOMAIN, 0
    message = f"the transaction callback raised {type(exc).__name__}: {exc}"
    return _ffi.lib.mi_error_new(domain, code, message.encode("utf-8", "replace"))

