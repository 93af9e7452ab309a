import pytest

from mongo_inline import CommandError


def test_commit_makes_writes_visible(client, coll):
    with client.start_session() as session:
        session.start_transaction(write_concern={"w": "majority"}, max_commit_time_ms=5000)
        coll.insert_one({"_id": 1}, session=session)
        coll.insert_one({"_id": 2}, session=session)
        assert coll.count_documents({}, session=session) == 2
        session.commit_transaction()
    assert coll.count_documents({}) == 2


def test_abort_discards_writes(client, coll):
    coll.insert_one({"_id": "before"})
    with client.start_session() as session:
        session.start_transaction()
        coll.insert_one({"_id": "inside"}, session=session)
        session.abort_transaction()
    assert [d["_id"] for d in coll.find()] == ["before"]


def test_closing_a_session_aborts_its_open_transaction(client, coll):
    coll.insert_one({"_id": "setup"})
    session = client.start_session()
    session.start_transaction()
    coll.insert_one({"_id": "dropped"}, session=session)
    session.close()
    assert coll.count_documents({"_id": "dropped"}) == 0


def test_session_id_is_a_uuid_document(client):
    with client.start_session() as session:
        lsid = session.session_id
    assert set(lsid) == {"id"}


def test_transient_error_carries_its_label(client, coll, fail_point):
    coll.insert_one({"_id": "setup"})
    fail_point({"times": 1}, failCommands=["insert"], errorCode=112,
               errorLabels=["TransientTransactionError"])
    with client.start_session() as session:
        session.start_transaction()
        with pytest.raises(CommandError) as raised:
            coll.insert_one({"_id": "x"}, session=session)
        assert raised.value.has_error_label("TransientTransactionError")
        session.abort_transaction()
