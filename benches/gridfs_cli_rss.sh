#!/usr/bin/env bash
# Peak memory of a GridFS round trip through the CLI: `put` a SIZE_MB
# (default 1024) MB file from stdin, `get` it back to stdout, and print each
# one's peak RSS above two bases, in MB and in chunks (the bucket's default
# 255 KiB): the peak of `ls` on the same bucket (a connected client that
# streams nothing), and the peak of the same command on an empty file (a
# `put` of nothing into a bucket of its own, so that it creates the indexes
# too, and the `get` of that file: the same code but the chunks' path).
# Not a test: it prints figures (benches/README's rule). The issue's target
# is under ~2 chunks above the base; the input and the output's SHA-256
# must match.
#
#   benches/gridfs_cli_rss.sh [URI]
#
# MONGO_INLINE_BIN: the binary (default target/release/mongo-inline, built
# if missing). Without a URI a throwaway SecantusDB is started (needs the
# .venv that .ci/install-server makes); the file lands in its temporary
# storage, so SIZE_MB of free disk is needed.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
size_mb="${SIZE_MB:-1024}"
chunk_bytes=$((255 * 1024))
# shellcheck source=benches/cli_rss_setup.sh
source "$repo_root/benches/cli_rss_setup.sh" "${1:-}"
db="bench_gridfs_$$"
empty_db="bench_gridfs_empty_$$"
name="round_trip.bin"

# peak_kb TIME_FILE: the maximum resident set size `/usr/bin/time -v` saw.
peak_kb() { awk -F': ' '/Maximum resident set size/ { print $2 }' "$1"; }
wall() { awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$1"; }

# run_timed NAME ARGS...: runs the CLI under /usr/bin/time -v (stdin and
# stdout as given), its report in $work/NAME.txt.
run_timed() {
    local name="$1"
    shift
    /usr/bin/time -v "$bin" "$uri" "$@" 2>"$work/$name.txt" || {
        cat "$work/$name.txt" >&2
        exit 1
    }
}
run_timed base ls "$db" >/dev/null
run_timed empty_put put "$empty_db" "$name" </dev/null >/dev/null
run_timed empty_get get "$empty_db" "$name" >/dev/null
# The input is generated as it is read (no 1 GB file on disk); its digest
# is taken on the way in.
head -c "$((size_mb * 1024 * 1024))" /dev/urandom |
    tee >(sha256sum | cut -d' ' -f1 >"$work/in.sha") |
    /usr/bin/time -v "$bin" "$uri" put "$db" "$name" >"$work/put.json" 2>"$work/put.txt" || {
    cat "$work/put.txt" >&2
    exit 1
}
/usr/bin/time -v "$bin" "$uri" get "$db" "$name" 2>"$work/get.txt" |
    sha256sum | cut -d' ' -f1 >"$work/out.sha" || {
    cat "$work/get.txt" >&2
    exit 1
}
sleep 1 # the tee's digest process may still be writing
"$bin" "$uri" rm "$db" "$name" >/dev/null
"$bin" "$uri" rm "$empty_db" "$name" >/dev/null

base="$(peak_kb "$work/base.txt")"
for step in put get; do
    awk -v step="$step" -v kb="$(peak_kb "$work/$step.txt")" -v base="$base" \
        -v empty="$(peak_kb "$work/empty_$step.txt")" -v chunk="$chunk_bytes" \
        -v mb="$size_mb" -v t="$(wall "$work/$step.txt")" 'BEGIN {
        printf "%s %d MB: peak RSS %.2f MB, %s wall\n", step, mb, kb / 1024, t
        above = (kb - base) * 1024
        printf "  above the base of ls (%.2f MB): %.2f MB = %.2f chunks of %d KiB\n",
            base / 1024, above / 1048576, above / chunk, chunk / 1024
        above = (kb - empty) * 1024
        printf "  above the base of %s of an empty file (%.2f MB): %.2f MB = %.2f chunks\n",
            step, empty / 1024, above / 1048576, above / chunk
    }'
done
if [[ "$(cat "$work/in.sha")" != "$(cat "$work/out.sha")" ]]; then
    echo "error: the file read back differs from the one stored" >&2
    exit 1
fi
echo "round trip: SHA-256 of the input and the output match"
