"""Runs a command with its stdout piped and reports, on stderr, the time from
spawn to its first line of output (a bench_find program's first result), from
spawn to exit, and its CPU (user + system, every thread, from wait4's rusage):
    python3 timed_run.py PROGRAM ARG...
        ->  TIMED result_ms=... wall_ms=... cpu_ms=...
The program's output passes through to stdout; the exit status is the
program's. benches/warm_start.rs runs every driver through it, so that all are
timed the same way from outside."""

import os
import subprocess
import sys
import time

start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
first = child.stdout.readline()
result = time.perf_counter() - start
rest = child.stdout.read()
_, status, usage = os.wait4(child.pid, 0)
wall = time.perf_counter() - start
sys.stdout.buffer.write(first + rest)
sys.stdout.flush()
print(f"TIMED result_ms={result * 1e3:.2f} wall_ms={wall * 1e3:.2f} "
      f"cpu_ms={(usage.ru_utime + usage.ru_stime) * 1e3:.2f}", file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(status))
