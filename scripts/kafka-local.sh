#!/usr/bin/env bash
# Start, stop or show the local single-node Kafka broker (KRaft, loopback, free port).
#   scripts/kafka-local.sh start|stop|status [--json] [--state-dir DIR]
# The same as 'logstore broker ...'; state lives in $LOGSTORE_STATE_DIR (default ~/.local/state/logstore).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/logstore ] || ./scripts/setup.sh >&2
exec .venv/bin/logstore broker "$@"
