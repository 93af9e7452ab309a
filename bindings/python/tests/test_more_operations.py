"""The operations beyond CRUD: each through its C ABI function."""

import pytest

from mongo_inline import ArgumentError, CommandError, WriteError


def test_replace_and_find_one_and_modify(coll):
    coll.insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": 2}])
    assert coll.replace_one({"_id": 1}, {"n": 10})["modifiedCount"] == 1
    before = coll.find_one_and_update({"_id": 2}, {"$inc": {"n": 1}})
    assert before == {"_id": 2, "n": 2}
    after = coll.find_one_and_update({"_id": 2}, {"$inc": {"n": 1}},
                                     options={"returnDocument": "after"})
    assert after == {"_id": 2, "n": 4}
    assert coll.find_one_and_replace({"_id": 1}, {"n": 11}) == {"_id": 1, "n": 10}
    assert coll.find_one_and_delete({"_id": 1}) == {"_id": 1, "n": 11}
    assert coll.find_one_and_delete({"_id": "none"}) is None


def test_distinct_counts_and_bulk_write(coll):
    result = coll.bulk_write([
        {"insertOne": {"document": {"_id": 1, "k": "a"}}},
        {"insertOne": {"document": {"_id": 2, "k": "b"}}},
        {"updateOne": {"filter": {"_id": 2}, "update": {"$set": {"k": "a"}}}},
        {"deleteOne": {"filter": {"_id": 9}}},
    ])
    assert (result["insertedCount"], result["modifiedCount"], result["deletedCount"]) == (2, 1, 0)
    assert coll.distinct("k") == ["a"]
    assert coll.estimated_document_count() == 2


def test_indexes(coll):
    coll.insert_one({"x": 1})
    assert coll.create_index({"x": 1}, {"name": "x_1", "unique": True}) == "x_1"
    assert sorted(coll.index_names()) == ["_id_", "x_1"]
    assert sorted(spec["name"] for spec in coll.list_indexes()) == ["_id_", "x_1"]
    coll.drop_index("x_1")
    assert coll.index_names() == ["_id_"]
    coll.create_indexes([{"key": {"y": 1}}, {"key": {"z": -1}}])
    coll.drop_indexes()
    assert coll.index_names() == ["_id_"]


def test_collections_and_databases(client):
    db = client["pytest_listing"]
    db.drop()
    capped = db.create_collection("capped", {"capped": True, "size": 4096})
    capped.insert_one({"x": 1})
    assert db.list_collection_names() == ["capped"]
    assert [spec["name"] for spec in db.list_collections()] == ["capped"]
    assert "pytest_listing" in client.list_database_names()
    assert any(d["name"] == "pytest_listing" for d in client.list_databases())
    assert db.aggregate([{"$documents": [{"a": 1}]}]).to_list() == [{"a": 1}]
    capped.drop()
    assert db.list_collection_names() == []
    client.drop_database("pytest_listing")


def test_an_unknown_option_names_itself(coll):
    with pytest.raises(ArgumentError, match="maxTimeMs"):
        coll.find_one_and_delete({}, options={"maxTimeMs": 5})


def test_dropping_a_missing_index_is_a_command_error(coll):
    coll.insert_one({})
    with pytest.raises(CommandError):
        coll.drop_index("nope_1")


def test_client_bulk_write_across_collections(client, coll):
    other = client["pytest"][coll.name + "_b"]
    ns_a, ns_b = f"pytest.{coll.name}", f"pytest.{other.name}"
    result = client.bulk_write([
        {"insertOne": {"namespace": ns_a, "document": {"_id": 1}}},
        {"insertOne": {"namespace": ns_b, "document": {"_id": 1}}},
        {"updateOne": {"namespace": ns_a, "filter": {"_id": 1}, "update": {"$set": {"x": 1}}}},
    ], options={"verboseResults": True})
    assert (result["insertedCount"], result["modifiedCount"]) == (2, 1)
    assert result["insertResults"]["1"] == {"insertedId": 1}
    assert coll.find_one({"_id": 1}) == {"_id": 1, "x": 1}
    with pytest.raises(WriteError) as caught:
        client.bulk_write([
            {"insertOne": {"namespace": ns_b, "document": {"_id": 2}}},
            {"insertOne": {"namespace": ns_a, "document": {"_id": 1}}},
        ])
    assert caught.value.code == 11000
    assert caught.value.details["writeErrors"]["1"]["code"] == 11000
    assert caught.value.details["partialResult"]["insertedCount"] == 1
    with pytest.raises(ArgumentError, match="namespace"):
        client.bulk_write([{"insertOne": {"document": {}}}])


def test_search_indexes_are_refused_by_a_server_without_atlas_search(coll):
    # SecantusDB answers every search-index command as a MongoDB without
    # Atlas Search does: ok 0, code 115 (CommandNotSupported).
    coll.insert_one({"x": 1})
    model = {"definition": {"mappings": {"dynamic": True}}, "name": "s1", "type": "search"}
    for call in [lambda: coll.create_search_index(model),
                 lambda: coll.create_search_indexes([model, {**model, "name": "s2"}]),
                 lambda: coll.update_search_index("s1", {"mappings": {"dynamic": False}}),
                 lambda: coll.drop_search_index("s1"),
                 lambda: coll.list_search_indexes("s1", options={"batchSize": 1}).to_list()]:
        with pytest.raises(CommandError) as refused:
            call()
        assert refused.value.code == 115, refused.value
    with pytest.raises(ArgumentError, match='has no field "nmae"'):
        coll.create_search_index({"definition": {}, "nmae": "s1"})
