"""os.fork: the child keeps using the client it inherited (the library drops
the inherited sockets and session pool and draws its own session ids); the
parent's sessions and cursors are refused in the child and keep working in
the parent."""

import json
import os

from mongo_inline import Client, InvalidOperation


def _lsid_recorder(seen):
    def on_event(event):
        if event["kind"] == "command_started" and "lsid" in event.get("document", {}):
            seen.add(bytes(event["document"]["lsid"]["id"]).hex())

    return on_event


def _child(client, coll, cursor, session, lsids, write_fd):
    lsids.clear()
    report = {}
    try:
        coll.insert_one({"from": "child"})
        with client.start_session() as own:
            coll.insert_one({"from": "child-session"}, session=own)
        try:
            next(cursor)
            report["cursor"] = "usable"
        except InvalidOperation as e:
            report["cursor"] = str(e)
        try:
            coll.insert_one({"from": "parent-session-in-child"}, session=session)
            report["session"] = "usable"
        except InvalidOperation as e:
            report["session"] = str(e)
        cursor.close()  # dropped, not freed: the parent's server cursor lives on
        session.close()
        report["lsids"] = sorted(lsids)
        client.close()
        status = 0
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        report["error"] = repr(e)
        status = 1
    os.write(write_fd, json.dumps(report).encode())
    os._exit(status)


def test_fork_child_uses_the_inherited_client_and_drops_parent_state(server_uri):
    lsids = set()
    client = Client(server_uri, event_listener=_lsid_recorder(lsids))
    coll = client["pytest"]["forked"]
    coll.delete_many({})
    coll.insert_many({"_id": i} for i in range(6))
    session = client.start_session()
    cursor = coll.find({}, sort={"_id": 1}, batch_size=2, session=session)
    assert next(cursor)["_id"] == 0
    parent_lsids = set(lsids)

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(client, coll, cursor, session, lsids, write_fd)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        report = json.loads(pipe.read() or b"{}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report
    assert "before fork" in report["cursor"], report
    assert "before fork" in report["session"], report
    assert report["lsids"] and not set(report["lsids"]) & parent_lsids, report

    # The parent's cursor and session carry on where they were.
    assert [d["_id"] for d in cursor] == [1, 2, 3, 4, 5]
    session.close()
    froms = sorted(d["from"] for d in coll.find({"from": {"$exists": True}}))
    assert froms == ["child", "child-session"]
    client.close()
