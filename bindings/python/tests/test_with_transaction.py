"""with_transaction over the C ABI's retry loop (mi_session_with_transaction)."""

import pytest

from mongo_inline import InvalidOperation


def test_with_transaction_retries_a_transient_error(client, coll, fail_point):
    coll.insert_one({"_id": "setup"})
    calls = []

    def callback(session):
        calls.append(1)
        coll.insert_one({"_id": len(calls)}, session=session)
        return "done"

    fail_point({"times": 1}, failCommands=["insert"], errorCode=112,
               errorLabels=["TransientTransactionError"])
    with client.start_session() as session:
        assert session.with_transaction(callback) == "done"
    assert len(calls) == 2
    assert coll.count_documents({"_id": {"$ne": "setup"}}) == 1


def test_with_transaction_retries_an_unknown_commit_result(client, coll, fail_point):
    coll.insert_one({"_id": "setup"})
    fail_point({"times": 1}, failCommands=["commitTransaction"], errorCode=91,
               errorLabels=["UnknownTransactionCommitResult"])
    with client.start_session() as session:
        session.with_transaction(lambda s: coll.insert_one({"_id": "once"}, session=s))
    assert coll.count_documents({"_id": "once"}) == 1


def test_an_exception_in_the_callback_aborts_and_propagates(client, coll):
    coll.insert_one({"_id": "setup"})

    class Stop(Exception):
        pass

    def callback(session):
        coll.insert_one({"_id": "never"}, session=session)
        raise Stop("the script changed its mind")

    with client.start_session() as session:
        with pytest.raises(Stop, match="changed its mind"):
            session.with_transaction(callback)
        # The session is usable afterwards: the transaction was aborted.
        session.start_transaction()
        session.abort_transaction()
    assert coll.count_documents({"_id": "never"}) == 0


def test_a_callback_that_commits_itself_is_fine(client, coll):
    coll.insert_one({"_id": "setup"})

    def callback(session):
        coll.insert_one({"_id": "self"}, session=session)
        session.commit_transaction()

    with client.start_session() as session:
        session.with_transaction(callback)
    assert coll.count_documents({"_id": "self"}) == 1


def test_with_transaction_on_a_closed_session(client):
    session = client.start_session()
    session.close()
    with pytest.raises(InvalidOperation):
        session.with_transaction(lambda s: None)


def test_closing_the_session_inside_the_callback_is_refused(client):
    with client.start_session() as session:
        with pytest.raises(InvalidOperation, match="cannot be closed"):
            session.with_transaction(lambda s: s.close())
