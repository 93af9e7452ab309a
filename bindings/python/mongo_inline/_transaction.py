"""with_transaction over the C ABI's callback loop (mi_session_with_transaction)."""

from . import _ffi
from .errors import InvalidOperation


def with_transaction(session, callback, options):
    if not _ffi.has("mi_session_with_transaction"):
        raise InvalidOperation(
            "with_transaction needs mi_session_with_transaction, which this build of "
            "libmongo_inline does not export; use start_transaction/commit_transaction"
        )
    raise NotImplementedError("mi_session_with_transaction's calling convention")
