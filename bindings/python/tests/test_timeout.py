"""Per-operation timeoutMS: a `timeout` block (as pymongo.timeout) and the
options' timeoutMS, each against an operation the server blocks for 2 s
(failCommand's blockConnection): only the timeout can end it sooner."""

import time

import pytest

import mongo_inline
from mongo_inline import ArgumentError, OperationTimeout


def _block_next(fail_point, command):
    fail_point({"times": 1}, failCommands=[command], blockConnection=True, blockTimeMS=2000)


def _assert_timed_out_within(started, seconds=0.1):
    took = time.monotonic() - started
    assert seconds * 0.9 <= took < 1.5, f"timed out after {took:.3f} s"


def test_a_timeout_block_bounds_a_blocked_read_and_write(coll, fail_point):
    coll.insert_one({"x": 1})
    for command, operation in [("find", lambda: coll.find_one({})),
                               ("insert", lambda: coll.insert_one({"x": 2})),
                               ("aggregate", lambda: coll.aggregate([]).to_list())]:
        _block_next(fail_point, command)
        started = time.monotonic()
        with pytest.raises(OperationTimeout), mongo_inline.timeout(0.1):
            operation()
        _assert_timed_out_within(started)
    assert coll.find_one({})["x"] == 1


def test_a_command_in_a_timeout_block(client, coll, fail_point):
    _block_next(fail_point, "count")
    started = time.monotonic()
    with pytest.raises(OperationTimeout), mongo_inline.timeout(0.1):
        client["pytest"].command({"count": coll.name})
    _assert_timed_out_within(started)
    reply = client["pytest"].command({"count": coll.name}, read_preference="nearest")
    assert reply["n"] == 0


def test_an_options_timeout_ms_bounds_one_operation(coll, fail_point):
    coll.insert_one({"_id": 1, "n": 1})
    _block_next(fail_point, "findAndModify")
    started = time.monotonic()
    with pytest.raises(OperationTimeout):
        coll.find_one_and_update({"_id": 1}, {"$inc": {"n": 1}}, options={"timeoutMS": 100})
    _assert_timed_out_within(started)
    cursor = coll.list_indexes(options={"timeoutMS": 1000, "timeoutMode": "iteration"})
    assert [spec["name"] for spec in cursor] == ["_id_"]


def test_a_transaction_and_a_commit_in_a_timeout_block(client, coll, fail_point):
    coll.insert_one({"before": True})
    with client.start_session() as session:
        _block_next(fail_point, "insert")
        started = time.monotonic()
        with pytest.raises(OperationTimeout), mongo_inline.timeout(0.1):
            session.with_transaction(lambda s: coll.insert_one({"in": "txn"}, session=s))
        _assert_timed_out_within(started)

        session.start_transaction()
        coll.insert_one({"in": "committed txn"}, session=session)
        _block_next(fail_point, "commitTransaction")
        started = time.monotonic()
        with pytest.raises(OperationTimeout), mongo_inline.timeout(0.1):
            session.commit_transaction()
        _assert_timed_out_within(started)


def test_the_block_deadline_is_shared_and_checked(coll):
    with pytest.raises(ArgumentError, match="non-negative number of seconds"):
        with mongo_inline.timeout(-1):
            pass
    with mongo_inline.timeout(0.05):
        with mongo_inline.timeout(60):  # cannot extend the outer deadline
            time.sleep(0.06)
            with pytest.raises(OperationTimeout, match="deadline passed"):
                coll.insert_one({"late": True})
    assert coll.count_documents({"late": True}) == 0


def test_search_index_functions_take_no_timeout(coll):
    with pytest.raises(ArgumentError, match='option "timeoutMS"'), mongo_inline.timeout(5):
        coll.drop_search_index("s1")
