#!/usr/bin/env bash
# Sourced by the CLI memory benches (benches/*_rss.sh) with the bench's
# first argument: sets `bin` (MONGO_INLINE_BIN, else the release CLI, built
# if missing), `work` (a temporary directory removed on exit) and `uri` (the
# argument, else a throwaway SecantusDB standalone, stopped on exit; it
# needs the .venv that .ci/install-server makes).

bin="${MONGO_INLINE_BIN:-${CARGO_TARGET_DIR:-$repo_root/target}/release/mongo-inline}"
if [[ ! -x "$bin" ]]; then
    cargo build --release --bin mongo-inline
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
uri="${1:-}"
if [[ -z "$uri" ]]; then
    # shellcheck source=.ci/install-server
    source "$repo_root/.ci/install-server"
    start_throwaway_server "$work/server.log" --standalone
    trap 'kill "$server_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
    uri="mongodb://127.0.0.1:$server_port/"
fi
