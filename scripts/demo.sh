#!/usr/bin/env bash
# The demo on a fresh machine: set up, start a local Kafka broker, and provision LogStore tables
# (Delta table + Kafka topic) from configs/demo.sql. Safe to run again: every step is idempotent.
# Leaves the broker running; stop it with: .venv/bin/logstore broker stop
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
LS=.venv/bin/logstore
export LOGSTORE_STATE_DIR="${LOGSTORE_STATE_DIR:-$PWD/.logstore/state}"
export LOGSTORE_WAREHOUSE="${LOGSTORE_WAREHOUSE:-$PWD/.logstore/warehouse}"

echo "== local Kafka broker"
if ! $LS broker status >/dev/null 2>&1; then
  $LS broker start
else
  $LS broker status
fi

echo "== validate the DDL"
$LS validate configs/demo.sql

echo "== create the Delta tables and Kafka topics (starts Spark)"
$LS create-table configs/demo.sql --if-not-exists

echo "== what exists now"
$LS list
$LS describe demo.orders

echo "== demo done. Warehouse: $LOGSTORE_WAREHOUSE"
echo "   stop the broker with: LOGSTORE_STATE_DIR=$LOGSTORE_STATE_DIR $LS broker stop"
