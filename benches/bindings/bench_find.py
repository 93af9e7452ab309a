"""benches/tools/bench_find.rs's protocol through bindings/python (ctypes):
    python bench_find.py cold URI DB COLL ID   -> DOC {json}
    python bench_find.py warm URI DB COLL N    -> ops_per_s=... cpu_us_per_op=...
"""

import os
import sys

from common import connecting, run_bench_find

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bindings", "python"))

from mongo_inline import Client  # noqa: E402

mode, uri, db, coll, arg = sys.argv[1:6]
connecting()
collection = Client(uri)[db][coll]
run_bench_find(mode, arg, lambda i: collection.find_one({"_id": i}))
