from mongo_inline import Client, InvalidOperation


def test_cursor_iterates_over_several_batches(server_uri):
    started = []
    with Client(server_uri, event_listener=lambda e: e["kind"] == "command_started"
                and started.append(e["command_name"])) as client:
        coll = client["pytest"]["batches"]
        coll.delete_many({})
        coll.insert_many({"_id": i} for i in range(11))
        started.clear()
        ids = [d["_id"] for d in coll.find({}, sort={"_id": 1}, batch_size=3)]
    assert ids == list(range(11))
    assert started.count("find") == 1
    assert started.count("getMore") == 3, started


def test_cursor_closed_early_kills_the_server_cursor(server_uri):
    started = []
    with Client(server_uri, event_listener=lambda e: e["kind"] == "command_started"
                and started.append(e["command_name"])) as client:
        coll = client["pytest"]["early"]
        coll.delete_many({})
        coll.insert_many({"_id": i} for i in range(6))
        cursor = coll.find({}, batch_size=2)
        assert next(cursor)["_id"] in range(6)
        cursor.close()
        cursor.close()  # a second close does nothing
        assert "killCursors" in started
        try:
            next(cursor)
            raise AssertionError("a closed cursor iterated")
        except InvalidOperation as e:
            assert "closed" in str(e)


def test_cursor_is_a_context_manager_and_exhausts_cleanly(coll):
    coll.insert_many([{"a": 1}, {"a": 2}])
    with coll.find({}, sort={"a": 1}) as cursor:
        assert [d["a"] for d in cursor] == [1, 2]
        assert list(cursor) == []  # an exhausted cursor stays exhausted
    assert coll.find({"a": 99}).to_list() == []
