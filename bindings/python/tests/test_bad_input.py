"""Bad input from a script is a Python exception, never a crash."""

import pytest

from mongo_inline import ArgumentError, Client, InvalidDocument, InvalidOperation


@pytest.mark.parametrize("value", [2**64, object(), {1: "int key"}, float("nan")],
                         ids=["int-too-big", "object", "non-str-key", "nan-is-fine"])
def test_a_value_bson_cannot_hold(coll, value):
    if isinstance(value, float):
        coll.insert_one({"v": value})  # NaN is a double: BSON holds it
        return
    with pytest.raises(InvalidDocument) as raised:
        coll.insert_one({"v": value})
    assert "BSON" in str(raised.value)


def test_a_bad_document_in_a_batch_inserts_nothing(coll):
    with pytest.raises(InvalidDocument):
        coll.insert_many([{"ok": 1}, {"bad": object()}])
    assert coll.count_documents({}) == 0


def test_not_a_document(coll):
    with pytest.raises(InvalidDocument):
        coll.insert_one("not a dict")
    with pytest.raises(InvalidDocument):
        coll.find_one(["a", "list"])


def test_bytes_that_are_not_bson_are_refused_by_the_library(coll):
    with pytest.raises(ArgumentError):
        coll.insert_one(b"\x05\x00\x00\x00\x01")


def test_names_of_the_wrong_type_or_with_nul(client):
    with pytest.raises(ArgumentError):
        client[42]
    with pytest.raises(ArgumentError):
        client["db"]["a\0b"]
    with pytest.raises(ArgumentError):
        Client("mongodb://127.0.0.1/\0")


def test_client_closed_twice_and_used_after_close(server_uri):
    client = Client(server_uri)
    coll = client["pytest"]["closed"]
    cursor = coll.find({})
    session = client.start_session()
    client.close()
    client.close()
    with pytest.raises(InvalidOperation, match="client is closed"):
        coll.insert_one({"x": 1})
    with pytest.raises(InvalidOperation):
        client.start_session()
    # Handles made before the close stay safe to close (twice) after it.
    session.close()
    session.close()
    cursor.close()
    cursor.close()
    with pytest.raises(InvalidOperation, match="session is closed"):
        session.start_transaction()


def test_a_session_of_another_client_is_refused(server_uri, coll):
    with Client(server_uri) as other, other.start_session() as session:
        with pytest.raises(InvalidOperation, match="another client"):
            coll.insert_one({"x": 1}, session=session)


def test_an_exception_in_an_event_listener_does_not_cross_into_c(server_uri, capfd):
    def listener(event):
        raise RuntimeError("listener failed")

    with Client(server_uri, event_listener=listener) as client:
        assert client["admin"].command({"ping": 1})["ok"] == 1.0
    assert "listener failed" in capfd.readouterr().err
