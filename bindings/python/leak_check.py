"""A short run through every kind of handle and error, for valgrind
(.ci/bindings runs it with PYTHONMALLOC=malloc). Usage: leak_check.py URI"""

import sys

from mongo_inline import Client, InvalidDocument, InvalidOperation, WriteError


def main(uri):
    client = Client(uri, event_listener=lambda event: None)
    coll = client["leak"]["check"]
    coll.delete_many({})
    coll.insert_many({"_id": i} for i in range(5))
    assert [d["_id"] for d in coll.find({}, sort={"_id": 1}, batch_size=2)] == list(range(5))
    early = coll.find({}, batch_size=1)
    next(early)
    early.close()
    early.close()
    try:
        coll.insert_one({"_id": 0})
    except WriteError:
        pass
    try:
        coll.insert_one({"v": object()})
    except InvalidDocument:
        pass
    with client.start_session() as session:
        session.start_transaction()
        coll.update_one({"_id": 1}, {"$set": {"x": 1}}, session=session)
        session.commit_transaction()
        session.start_transaction()
        coll.delete_one({"_id": 2}, session=session)
        # left open: ending the session aborts it
    with client.start_session() as session:
        session.with_transaction(lambda s: coll.update_one({"_id": 3}, {"$set": {"y": 1}}, session=s))
        try:
            session.with_transaction(lambda s: coll.insert_one({"_id": 4}, session=s))
        except WriteError:
            pass  # the library's own error, handed back and raised again

        def fails(s):
            raise KeyError("callback")

        try:
            session.with_transaction(fails)
        except KeyError:
            pass
    assert coll.count_documents({}) == 5
    client.close()
    client.close()
    try:
        coll.find_one()
    except InvalidOperation:
        pass
    print("leak check: ok")


if __name__ == "__main__":
    main(sys.argv[1])
