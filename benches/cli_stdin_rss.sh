#!/usr/bin/env bash
# Peak memory of `mongo-inline insert NS` reading its documents from stdin:
# writes about SIZE_MB (default 100) MB of JSON lines (~500-byte documents),
# pipes them into the CLI and prints the input's size, the CLI's peak RSS
# (`/usr/bin/time -v`'s maximum resident set size) and their ratio. Not a
# test: it prints a figure (benches/README's rule). The CLI holds the input
# as BSON before sending it in chunks (a bad line must insert nothing), so
# the ratio should stay near 1.
#
#   benches/cli_stdin_rss.sh [URI]
#
# MONGO_INLINE_BIN: the binary (default target/release/mongo-inline, built
# if missing). Without a URI a throwaway SecantusDB is started (needs the
# .venv that .ci/install-server makes).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
size_mb="${SIZE_MB:-100}"
# shellcheck source=benches/cli_rss_setup.sh
source "$repo_root/benches/cli_rss_setup.sh" "${1:-}"

input="$work/input.jsonl"
python3 - "$input" "$size_mb" <<'PY'
import json, sys
path, size = sys.argv[1], int(sys.argv[2]) * 1_000_000
pad = "x" * 380
with open(path, "w") as out:
    written, i = 0, 0
    while written < size:
        line = json.dumps({"i": i, "name": f"user {i}", "score": i * 0.5,
                           "tags": ["a", "b", "c"], "pad": pad}) + "\n"
        out.write(line)
        written += len(line)
        i += 1
PY
input_bytes="$(stat -c %s "$input")"
ns="bench.stdin_$$"
/usr/bin/time -v "$bin" "$uri" insert "$ns" <"$input" >"$work/out.json" 2>"$work/time.txt" || {
    cat "$work/time.txt" >&2
    exit 1
}
peak_kb="$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$work/time.txt")"
elapsed="$(awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$work/time.txt")"
inserted="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["insertedCount"])' "$work/out.json")"
awk -v b="$input_bytes" -v kb="$peak_kb" -v n="$inserted" -v t="$elapsed" 'BEGIN {
    printf "input %.1f MB (%d documents inserted), peak RSS %.1f MB, %.2fx the input, %s wall\n",
        b / 1e6, n, kb * 1024 / 1e6, kb * 1024 / b, t
}'
