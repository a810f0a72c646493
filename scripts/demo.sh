#!/usr/bin/env bash
# The demo on a fresh machine: set up, start a local Kafka broker, run Spark + Delta + Kafka.
# Leaves the broker running (stop it with: .venv/bin/logstore broker stop).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
LS=.venv/bin/logstore
export LOGSTORE_STATE_DIR="${LOGSTORE_STATE_DIR:-$PWD/.logstore/state}"
WAREHOUSE="${LOGSTORE_WAREHOUSE:-$PWD/.logstore/warehouse}"

if ! $LS broker status --json >/dev/null 2>&1; then
  $LS broker start
fi
BOOTSTRAP="$($LS broker status --json | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["bootstrap"])')"
echo "== broker at $BOOTSTRAP"

.venv/bin/python scripts/demo_smoke.py "$BOOTSTRAP" "$WAREHOUSE"
echo "== demo done; stop the broker with: LOGSTORE_STATE_DIR=$LOGSTORE_STATE_DIR $LS broker stop"
