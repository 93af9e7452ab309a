"""The modes both Python bench_find scripts share. Imported first: the time
to the first result counts from here, the driver's import included."""

import sys
import time

START = time.perf_counter()
CONNECTING = [START]


def connecting():
    """Marks the start of connecting: round trips are counted from here."""
    CONNECTING[0] = time.perf_counter()


def run_bench_find(mode, arg, find_one):
    if mode == "cold":
        document = find_one(int(arg))
        now = time.perf_counter()
        print(f"FIRST_MS {(now - START) * 1e3:.3f}")
        print(f"CONNECTED_MS {(now - CONNECTING[0]) * 1e3:.3f}")
        print("DOC", {key: str(value) for key, value in document.items()})
        return
    if mode != "warm":
        sys.exit("usage: cold|warm URI DB COLL ID|N")
    ops = int(arg)
    find_one(1)  # connected and warm
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(ops):
        if find_one(1) is None:
            sys.exit("find_one found nothing")
    seconds = time.perf_counter() - start
    print(f"ops_per_s={ops / seconds:.0f} cpu_us_per_op={(time.process_time() - cpu) * 1e6 / ops:.2f}")
