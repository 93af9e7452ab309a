import datetime

import bson
from bson import Binary, Decimal128, Int64, ObjectId


def test_insert_and_find_one_round_trip_types(coll):
    document = {
        "_id": ObjectId(),
        "name": "Ada",
        "born": datetime.datetime(1815, 12, 10, tzinfo=datetime.timezone.utc),
        "big": Int64(2**40),
        "price": Decimal128("9.99"),
        "blob": b"\x00\x01\x02",
        "custom": Binary(b"\x07", 0x80),
        "tags": ["math", {"nested": True}],
        "nothing": None,
    }
    result = coll.insert_one(document)
    assert result["insertedId"] == document["_id"]
    found = coll.find_one({"_id": document["_id"]})
    found["born"] = found["born"].replace(tzinfo=datetime.timezone.utc)
    assert found == document


def test_insert_one_generates_an_id(coll):
    result = coll.insert_one({"x": 1})
    assert isinstance(result["insertedId"], ObjectId)
    assert coll.find_one({"_id": result["insertedId"]})["x"] == 1


def test_insert_many_and_count(coll):
    result = coll.insert_many({"i": i} for i in range(5))
    assert sorted(result["insertedIds"]) == ["0", "1", "2", "3", "4"]
    assert coll.count_documents({}) == 5
    assert coll.count_documents({"i": {"$gte": 3}}) == 2
    assert coll.count_documents({}, limit=2) == 2
    assert coll.count_documents({}, skip=4) == 1


def test_update_one_many_and_upsert(coll):
    coll.insert_many([{"k": "a", "n": 0}, {"k": "a", "n": 0}, {"k": "b", "n": 0}])
    one = coll.update_one({"k": "a"}, {"$inc": {"n": 1}})
    assert (one["matchedCount"], one["modifiedCount"]) == (1, 1)
    many = coll.update_many({"k": "a"}, {"$set": {"seen": True}})
    assert (many["matchedCount"], many["modifiedCount"]) == (2, 2)
    upserted = coll.update_one({"k": "c"}, {"$set": {"n": 9}}, upsert=True)
    assert upserted["matchedCount"] == 0 and "upsertedId" in upserted
    assert coll.find_one({"k": "c"})["n"] == 9


def test_delete_one_and_many(coll):
    coll.insert_many([{"k": 1}, {"k": 1}, {"k": 2}])
    assert coll.delete_one({"k": 1})["deletedCount"] == 1
    assert coll.delete_many({})["deletedCount"] == 2
    assert coll.find_one() is None


def test_find_options_and_aggregate(coll):
    coll.insert_many({"_id": i, "even": i % 2 == 0} for i in range(6))
    found = coll.find({"even": True}, sort={"_id": -1}, projection={"even": 0}, skip=1).to_list()
    assert found == [{"_id": 2}, {"_id": 0}]
    grouped = coll.aggregate([{"$group": {"_id": "$even", "n": {"$sum": 1}}},
                              {"$sort": {"_id": 1}}]).to_list()
    assert grouped == [{"_id": False, "n": 3}, {"_id": True, "n": 3}]


def test_command_reply_is_a_dict(client):
    reply = client["admin"].command({"ping": 1})
    assert reply["ok"] == 1.0
    assert bson.decode(bson.encode(reply)) == reply
