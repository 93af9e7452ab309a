"""One SecantusDB (a one-member replica set, in memory) per test session.

The server binary comes from SECANTUSD (set by .ci/install-server); the
library from MONGO_INLINE_LIB (set by .ci/bindings).
"""

import os
import socket
import subprocess
import time
import uuid

import pytest


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server_uri(tmp_path_factory):
    binary = os.environ.get("SECANTUSD")
    if not binary:
        pytest.fail("SECANTUSD is not set: the path of SecantusDB's secantusd-py")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("server") / "server.log", "wb")
    process = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", str(port), "--storage-path", ":memory:",
         "--enable-test-commands"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"SecantusDB did not start on port {port} (see {log.name})")
            time.sleep(0.05)
    yield f"mongodb://127.0.0.1:{port}/?replicaSet=secantus"
    process.kill()
    process.wait()
    log.close()


@pytest.fixture()
def client(server_uri):
    from mongo_inline import Client

    with Client(server_uri) as c:
        yield c


@pytest.fixture()
def coll(client):
    """A fresh collection of its own per test."""
    return client["pytest"][f"c_{uuid.uuid4().hex[:12]}"]


@pytest.fixture()
def fail_point(client):
    """Sets failCommand fail points; turns them off after the test."""
    set_any = []

    def configure(mode, **data):
        client["admin"].command({"configureFailPoint": "failCommand", "mode": mode, "data": data})
        set_any.append(True)

    yield configure
    if set_any:
        client["admin"].command({"configureFailPoint": "failCommand", "mode": "off"})
