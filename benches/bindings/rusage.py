"""Runs a command and reports, on stderr, its spawn -> exit wall time, CPU
(user + system, every thread) and peak RSS, from wait4's rusage:
    python3 rusage.py PROGRAM ARG...  ->  RUSAGE wall_ms=... cpu_ms=... rss_kib=...
The program's own output passes through; the exit status is the program's."""

import os
import subprocess
import sys
import time

start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(child.pid, 0)
wall = time.perf_counter() - start
child.returncode = os.waitstatus_to_exitcode(status)
print(f"RUSAGE wall_ms={wall * 1e3:.2f} cpu_ms={(usage.ru_utime + usage.ru_stime) * 1e3:.2f} "
      f"rss_kib={usage.ru_maxrss}", file=sys.stderr)
sys.exit(child.returncode)
