import pytest

from mongo_inline import (ArgumentError, Client, CommandError, InvalidOperation,
                          ServerSelectionError, WriteError)


def test_duplicate_key_is_a_write_error_with_its_code(coll):
    coll.insert_one({"_id": 7})
    with pytest.raises(WriteError) as raised:
        coll.insert_one({"_id": 7})
    assert raised.value.code == 11000
    assert "duplicate key" in str(raised.value).lower()


def test_server_error_carries_its_labels(coll, fail_point):
    fail_point({"times": 1}, failCommands=["insert"], errorCode=2,
               errorLabels=["PyTestLabel", "OtherLabel"])
    with pytest.raises(CommandError) as raised:
        coll.insert_one({"x": 1})
    assert raised.value.code == 2
    assert set(raised.value.labels) == {"PyTestLabel", "OtherLabel"}
    assert raised.value.has_error_label("PyTestLabel")
    assert not raised.value.has_error_label("RetryableWriteError")


def test_a_retryable_error_is_retried_once(coll, fail_point):
    fail_point({"times": 1}, failCommands=["insert"], errorCode=91,
               errorLabels=["RetryableWriteError"])
    coll.insert_one({"_id": "retried"})
    assert coll.count_documents({"_id": "retried"}) == 1


def test_bad_uri_names_the_problem():
    with pytest.raises(ArgumentError) as raised:
        Client("mongodb://host:notaport/")
    assert "port" in str(raised.value).lower()


def test_invalid_collection_name_is_refused_before_sending(client):
    with pytest.raises(ArgumentError) as raised:
        client["pytest"]["bad$name"].insert_one({"x": 1})
    assert "name" in str(raised.value).lower()


def test_unknown_command_is_a_command_error(client):
    with pytest.raises(CommandError) as raised:
        client["admin"].command({"noSuchCommandAnywhere": 1})
    assert raised.value.code == 59


def test_commit_without_transaction_is_invalid_operation(client):
    with client.start_session() as session:
        with pytest.raises(InvalidOperation):
            session.commit_transaction()


def test_unreachable_server_is_a_server_selection_error(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Client(f"mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=100"
                "&connectTimeoutMS=100") as client:
        with pytest.raises(ServerSelectionError):
            client["admin"].command({"ping": 1})
