#!/usr/bin/env bash
# Start, stop or show the local single-node Kafka broker (KRaft, loopback only).
#   scripts/kafka-local.sh start [--port N] [--fresh] [--timeout S] [--json] [--state-dir DIR]
#   scripts/kafka-local.sh stop [--timeout S] [--json] [--state-dir DIR]
#   scripts/kafka-local.sh status [--json] [--state-dir DIR]
# The same as 'logstore broker ...' (every flag is passed through). A restart keeps the topics, records
# and port of the last start; --fresh starts empty. State lives in $LOGSTORE_STATE_DIR (default
# ~/.local/state/logstore).
set -euo pipefail
# No 'cd': a relative --state-dir or LOGSTORE_STATE_DIR means the caller's directory.
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x "$root/.venv/bin/logstore" ] || (cd "$root" && ./scripts/setup.sh >&2)
exec "$root/.venv/bin/logstore" broker "$@"
