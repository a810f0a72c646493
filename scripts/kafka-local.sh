#!/usr/bin/env bash
# Start, stop or show the local Kafka broker, or a local cluster of three (KRaft, loopback only).
#   scripts/kafka-local.sh start [--brokers 1|3] [--port N] [--fresh] [--timeout S] [--json] [--state-dir DIR]
#   scripts/kafka-local.sh start --node N [--timeout S] [--json] [--state-dir DIR]   # one node of a cluster
#   scripts/kafka-local.sh stop [--node N [--kill]] [--timeout S] [--json] [--state-dir DIR]
#   scripts/kafka-local.sh status [--json] [--state-dir DIR]
# The same as 'logstore broker ...' (every flag is passed through). A restart keeps the topics, records,
# ports and node count of the last start; --fresh starts empty (and may change the node count).
# --brokers 3: three nodes, each a KRaft controller and a broker; topics default to replication 3 and
# min.insync.replicas 2; the bootstrap address lists all three. State lives in $LOGSTORE_STATE_DIR
# (default ~/.local/state/logstore).
set -euo pipefail
# No 'cd': a relative --state-dir or LOGSTORE_STATE_DIR means the caller's directory.
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x "$root/.venv/bin/logstore" ] || (cd "$root" && ./scripts/setup.sh >&2)
exec "$root/.venv/bin/logstore" broker "$@"
