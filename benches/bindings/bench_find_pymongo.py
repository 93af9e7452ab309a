"""benches/tools/bench_find.rs's protocol through PyMongo."""

import sys

from common import connecting, run_bench_find

from pymongo import MongoClient  # noqa: E402 - after common: its import counts

mode, uri, db, coll, arg = sys.argv[1:6]
connecting()
client = MongoClient(uri)
collection = client[db][coll]
run_bench_find(mode, arg, lambda i: collection.find_one({"_id": i}))
client.close()
