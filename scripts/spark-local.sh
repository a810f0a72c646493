#!/usr/bin/env bash
# Start, stop or show a local Spark standalone cluster (a master and workers on loopback).
#   scripts/spark-local.sh start [--workers N] [--worker-cores C] [--worker-memory M] [--port P]
#                                [--worker N] [--timeout S] [--json] [--state-dir DIR]
#   scripts/spark-local.sh stop [--worker N [--kill]] [--timeout S] [--json] [--state-dir DIR]
#   scripts/spark-local.sh status [--json] [--state-dir DIR]
# The same as 'logstore spark ...' (every flag is passed through). Jobs run on it with
# --master spark://127.0.0.1:PORT (start prints it). State and logs live in
# $LOGSTORE_STATE_DIR/spark-cluster (default ~/.local/state/logstore).
set -euo pipefail
# No 'cd': a relative --state-dir or LOGSTORE_STATE_DIR means the caller's directory.
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x "$root/.venv/bin/logstore" ] || (cd "$root" && ./scripts/setup.sh >&2)
exec "$root/.venv/bin/logstore" spark "$@"
