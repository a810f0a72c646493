#!/usr/bin/env bash
# logstore as a CI pipeline drives it: validate -> create-table -> ingest -> read -> verify ->
# status -> drop-table, with the installed console script, every result parsed from --json with
# python -c (no jq), and every exit code checked: 0 ok, 2 invalid input, 1 operational failure.
#
# Needs a running Kafka broker: LOGSTORE_KAFKA_BOOTSTRAP_SERVERS (tests/e2e/test_pipeline.py passes
# the test-suite's). LOGSTORE_BIN: the logstore to drive (default: the repository's .venv);
# PYTHON: the interpreter that parses JSON (default: python3). Its warehouse and state dir are a
# temporary directory, removed on exit. Prints "pipeline: ok" and exits 0 when every check passes.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
LOGSTORE=${LOGSTORE_BIN:-$REPO/.venv/bin/logstore}
PYTHON=${PYTHON:-python3}
: "${LOGSTORE_KAFKA_BOOTSTRAP_SERVERS:?set it to a running Kafka broker (host:port)}"
[ -x "$LOGSTORE" ] || { echo "pipeline: no logstore at $LOGSTORE (run scripts/setup.sh)" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf -- "$WORK"' EXIT
export LOGSTORE_WAREHOUSE=$WORK/warehouse LOGSTORE_STATE_DIR=$WORK/state LOGSTORE_KAFKA_TIMEOUT=10
unset LOGSTORE_CONFIG LOGSTORE_VERBOSE
cd "$WORK"

RUN_ID=$(date +%s)$$
TABLE=ci.orders_$RUN_ID
TOPIC=ci_orders_$RUN_ID
KEYS=300 # --total = --keys: every generated change inserts a new key

fail() { echo "pipeline: FAIL: $*" >&2; exit 1; }

# run CODE NAME -- ARGS...: logstore ARGS with stdout in NAME.out and stderr in NAME.err; the exit
# code must be CODE, and no traceback may reach stderr.
run() {
  local want=$1 name=$2 rc=0
  shift 3
  local t0=$EPOCHREALTIME
  "$LOGSTORE" "$@" >"$name.out" 2>"$name.err" </dev/null || rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "--- stderr of logstore $*" >&2
    cat "$name.err" >&2
    fail "logstore $* exited $rc, expected $want"
  fi
  if grep -q "Traceback" "$name.err"; then fail "logstore $* printed a traceback"; fi
  awk -v a="$t0" -v b="$EPOCHREALTIME" -v n="$name" -v c="$rc" \
    'BEGIN { printf "pipeline: %-22s exit %d  %5.1f s\n", n, c, b - a }'
}

# q FILE EXPR: EXPR over the JSON document in FILE (as d), printed; q fails if FILE is not JSON.
q() { "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
# ql FILE EXPR: EXPR over the JSON lines of FILE (as rows); fails if any line is not JSON.
ql() { "$PYTHON" -c 'import json, sys; rows = [json.loads(l) for l in open(sys.argv[1])]; print(eval(sys.argv[2]))' "$@"; }
# check WHAT ACTUAL EXPECTED
check() { [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"; }
# stderr_has NAME TEXT: the command's stderr says TEXT
stderr_has() { grep -qF -- "$2" "$1.err" || fail "$1: stderr does not say '$2': $(cat "$1.err")"; }

cat >orders.sql <<EOF
-- the pipeline's table: Paimon vocabulary, Flink shape
CREATE TABLE $TABLE (
    id BIGINT,
    customer STRING,
    amount DECIMAL(10, 2),
    PRIMARY KEY (id) NOT ENFORCED
) WITH (
    'log.system' = 'kafka',
    'kafka.topic' = '$TOPIC',
    'log.system.partitions' = '2'
);
EOF
sed 's/log.system.partitions/log.system.partitons/' orders.sql >typo.sql

# -- validate ------------------------------------------------------------------------------------
run 0 validate -- validate orders.sql --json
check "validate: tables" "$(q validate.out '[t["name"] for t in d]')" "['$TABLE']"
check "validate: primary key" "$(q validate.out 'd[0]["primary_key"]')" "['id']"
run 2 validate-typo -- validate typo.sql --json
stderr_has validate-typo "typo.sql:$(grep -n partitons typo.sql | cut -d: -f1):"
stderr_has validate-typo "log.system.partitions" # the suggestion
check "validate-typo: stdout" "$(cat validate-typo.out)" ""

# -- create-table --------------------------------------------------------------------------------
run 0 create-dry-run -- create-table orders.sql --dry-run --json
check "create-table --dry-run: status" "$(q create-dry-run.out '[r["status"] for r in d]')" "['planned']"
run 2 create-typo -- create-table typo.sql --json
run 0 create -- create-table orders.sql --json
check "create-table: status" "$(q create.out '[r["status"] for r in d]')" "['created']"
check "create-table: topic" "$(q create.out 'd[0]["topic"]["name"]')" "$TOPIC"
run 1 create-again -- create-table orders.sql --json
stderr_has create-again "$TABLE"
run 0 create-if-not-exists -- create-table orders.sql --if-not-exists --json
check "create-table --if-not-exists: status" "$(q create-if-not-exists.out '[r["status"] for r in d]')" "['exists']"
run 0 list -- list --json
check "list: the table" "$(q list.out "[t['name'] for t in d if t['name'] == '$TABLE']")" "['$TABLE']"

# -- ingest --------------------------------------------------------------------------------------
run 2 ingest-bad-option -- ingest "$TABLE" --source generate --rate 0 --total 10 --once --json
stderr_has ingest-bad-option "--rate"
run 2 ingest-no-total -- ingest "$TABLE" --source generate --once --json
run 0 ingest -- ingest "$TABLE" --source generate --total "$KEYS" --keys "$KEYS" --seed 7 \
  --job ci --once --json
check "ingest: last event" "$(ql ingest.out 'rows[-1]["event"]')" "done"
ingested=$(ql ingest.out 'rows[-1]["rows"]')
epochs=$(ql ingest.out 'sum(1 for e in rows if e["event"] == "epoch")')
check "ingest: rows" "$ingested" "$KEYS"
check "ingest: epoch rows add up" "$(ql ingest.out 'sum(e["rows"] for e in rows if e["event"] == "epoch")')" "$ingested"
check "ingest: quarantined" "$(ql ingest.out 'rows[-1]["quarantined"]')" "0"
[ "$epochs" -ge 1 ] || fail "ingest: no epoch event"

# -- read ----------------------------------------------------------------------------------------
run 0 read-file -- read "$TABLE" --mode file --json
check "read --mode file: rows = rows ingested" "$(ql read-file.out 'len(rows)')" "$ingested"
check "read --mode file: distinct keys" "$(ql read-file.out 'len({r["row"]["id"] for r in rows})')" "$ingested"
run 0 read-log -- read "$TABLE" --mode log --consistent --json
fold='len({r["row"]["id"] for r in rows if r["kind"] in ("+I", "+U")} - {r["row"]["id"] for r in rows if r["kind"] in ("-U", "-D")})'
check "read --mode log --consistent: keys in the fold = rows ingested" "$(ql read-log.out "$fold")" "$ingested"
run 0 read-log-limit -- read "$TABLE" --mode log --consistency committed --limit 5 --json
check "read --limit 5: rows" "$(ql read-log-limit.out 'len(rows)')" "5"
run 2 read-bad-mode -- read "$TABLE" --mode lgo --json
stderr_has read-bad-mode "lgo"

# -- verify --------------------------------------------------------------------------------------
run 0 verify -- verify "$TABLE" --json
check "verify: equal" "$(q verify.out 'd["equal"]')" "True"
check "verify: Delta rows = rows ingested" "$(q verify.out 'd["delta"]["rows"]')" "$ingested"
check "verify: keys in the committed log = rows ingested" "$(q verify.out 'd["log"]["rows"]')" "$ingested"
check "verify: epochs in the log = in Delta" "$(q verify.out 'd["log"]["epochs"]')" "$(q verify.out 'd["delta"]["epochs"]')"
check "verify: epochs = ingest's" "$(q verify.out 'd["log"]["epochs"]')" "$epochs"

# -- status --------------------------------------------------------------------------------------
run 0 status -- status "$TABLE" --json
check "status: writers" "$(q status.out 'len(d["writers"])')" "1"
check "status: last epoch" "$(q status.out 'd["writers"][0]["epoch"]')" "$((epochs - 1))"
check "status: Delta version" "$(q status.out 'd["delta"]["version"]')" "$(q verify.out 'd["delta_version"]')"
check "status: after commit (the marker only)" "$(q status.out '[p["after_commit"] for p in d["log"]["partitions"]]')" "[1, 1]"
check "status: no live lease" "$(q status.out 'd["lease"] is None or d["lease"].get("expired") or d["lease"].get("holder_running") is False')" "True"

# -- a table that is not there: exit 1, nothing on stdout ----------------------------------------
for cmd in describe status verify read; do
  run 1 "$cmd-missing" -- "$cmd" ci.no_such_table --json
  stderr_has "$cmd-missing" "not found"
  check "$cmd of a missing table: stdout" "$(cat "$cmd-missing.out")" ""
done

# -- drop-table ----------------------------------------------------------------------------------
run 2 drop-unconfirmed -- drop-table "$TABLE" --delete-topic --json
stderr_has drop-unconfirmed "--yes"
run 0 drop -- drop-table "$TABLE" --delete-topic --yes --json
q drop.out 'd' >/dev/null # JSON
run 0 list-after -- list --json
check "list after drop-table" "$(q list-after.out "[t['name'] for t in d if t['name'] == '$TABLE']")" "[]"
run 1 status-after -- status "$TABLE" --json
run 1 drop-again -- drop-table "$TABLE" --yes --json

echo "pipeline: ok ($TABLE: $ingested rows in $epochs epoch(s); the log and Delta agree)"
