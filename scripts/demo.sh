#!/usr/bin/env bash
# The whole logstore story on one machine, step by step:
#   set-up, a local Kafka broker, the two tables of configs/demo.sql (a Delta table and a Kafka
#   topic each), generated changes double-written by an ingest job that is SIGKILLed in the middle
#   of an epoch and restarted, the log read at the table's consistency, the Delta table read,
#   verify, and a summary that shows that the log and the file store agree.
#
#   scripts/demo.sh            run it; safe to run again (each run ingests as a new job)
#   scripts/demo.sh --clean    stop the demo's broker, remove the demo's state and warehouse
#   --warehouse s3|hdfs        the same story with the Delta tables on the project's own S3 server
#                              (versitygw) or HDFS (a MiniDFSCluster), started on 127.0.0.1 for the
#                              run and stopped at its end; 'local' (a directory) is the default
#   --log kafka|pulsar         the log system: 'kafka' (the default) or 'pulsar': the project's Pulsar
#                              standalone, started for the run and stopped at its end, and the table
#                              of configs/demo-pulsar.sql (Amoro's Pulsar DDL); local warehouse only
#
# Everything lives under .logstore/ in the repository (LOGSTORE_STATE_DIR and LOGSTORE_WAREHOUSE
# move it; --clean removes a directory given that way only when the demo created it). The demo
# uses its own broker: LOGSTORE_CONFIG and LOGSTORE_KAFKA_BOOTSTRAP_SERVERS are ignored. With s3 or
# hdfs the state is .logstore/state-s3 or state-hdfs (a broker of its own: a topic belongs to one
# warehouse) and holds the server's data, kept between runs; LOGSTORE_WAREHOUSE and the AWS_*
# variables are ignored then (the server's own are used). With pulsar the state and warehouse are
# .logstore/state-pulsar and warehouse-pulsar (demo.orders there is a Pulsar table); LOGSTORE_CONFIG
# and LOGSTORE_PULSAR_ADMIN_URL are ignored too. The changes are reproducible:
# DEMO_SEED (42), DEMO_CHANGES (12000), DEMO_KEYS (500), DEMO_RATE (100 a second).
# Exit 0 when every step worked and the stores agree, 1 otherwise, 2 for a bad argument.
set -euo pipefail
export LC_ALL=C  # decimal points in the timings

ORIG_PWD=$PWD
cd "$(dirname "$0")/.."
ROOT=$PWD
DEMO_HOME=$ROOT/.logstore
MARK=.logstore-demo # in a directory the demo created: --clean may remove it

usage() { sed -n '2,27s/^# \{0,1\}//p' "$0"; }
bad_usage() { echo "demo.sh: error: $1" >&2; usage >&2; exit 2; }

BACKEND=local LOG=kafka CLEAN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --clean) CLEAN=1 ;;
    --warehouse | --warehouse=*)
      if [ "$1" = --warehouse ]; then
        [ $# -ge 2 ] || bad_usage "--warehouse needs a value: local, s3 or hdfs"
        BACKEND=$2
        shift
      else
        BACKEND=${1#--warehouse=}
      fi
      case "$BACKEND" in
        local | s3 | hdfs) ;;
        *) bad_usage "--warehouse '$BACKEND' is not a warehouse the demo knows: use local, s3 or hdfs" ;;
      esac
      ;;
    --log | --log=*)
      if [ "$1" = --log ]; then
        [ $# -ge 2 ] || bad_usage "--log needs a value: kafka or pulsar"
        LOG=$2
        shift
      else
        LOG=${1#--log=}
      fi
      case "$LOG" in
        kafka | pulsar) ;;
        *) bad_usage "--log '$LOG' is not a log system the demo knows: use kafka or pulsar" ;;
      esac
      ;;
    -h | --help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
  shift
done
if [ "$LOG" = pulsar ] && [ "$BACKEND" != local ]; then
  bad_usage "--log pulsar runs on the local warehouse only, not with --warehouse $BACKEND: drop one of the two"
fi

abspath() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$ORIG_PWD" "$1" ;; esac; }
if [ "$BACKEND" = local ]; then
  SUFFIX="" # a Pulsar demo.orders is another table: its own state (the standalone) and warehouse
  [ "$LOG" = kafka ] || SUFFIX=-$LOG
  STATE=$(abspath "${LOGSTORE_STATE_DIR:-$DEMO_HOME/state$SUFFIX}")
  WAREHOUSE=$(abspath "${LOGSTORE_WAREHOUSE:-$DEMO_HOME/warehouse$SUFFIX}")
  export LOGSTORE_WAREHOUSE=$WAREHOUSE
else
  # The warehouse is on the demo's server (set once it runs), its data in the state dir; only the
  # server's endpoint and keys reach it.
  STATE=$(abspath "${LOGSTORE_STATE_DIR:-$DEMO_HOME/state-$BACKEND}")
  WAREHOUSE=""
  unset LOGSTORE_WAREHOUSE AWS_PROFILE AWS_DEFAULT_REGION AWS_ENDPOINT_URL_S3 AWS_SESSION_TOKEN \
    AWS_ENDPOINT_URL AWS_REGION AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_ALLOW_HTTP
fi
export LOGSTORE_STATE_DIR=$STATE
unset LOGSTORE_CONFIG LOGSTORE_KAFKA_BOOTSTRAP_SERVERS LOGSTORE_PULSAR_ADMIN_URL
LS=$ROOT/.venv/bin/logstore
PY=$ROOT/.venv/bin/python
SERVER_DIR=$STATE/$BACKEND-server # the server's state, as scripts/s3-server.sh and hdfs-server.sh keep it
BUCKET=logstore-demo              # the S3 bucket, or the HDFS directory, of the demo's warehouse

# -- --clean -------------------------------------------------------------------------------------

remove_demo_dir() {
  local dir=$1
  if [ ! -e "$dir" ] && [ ! -L "$dir" ]; then
    echo "  $dir: not there"
  elif [ "$dir" = "$DEMO_HOME/state" ] || [ "$dir" = "$DEMO_HOME/warehouse" ] \
    || [ "$dir" = "$DEMO_HOME/state-pulsar" ] || [ "$dir" = "$DEMO_HOME/warehouse-pulsar" ] \
    || [ "$dir" = "$DEMO_HOME/state-s3" ] || [ "$dir" = "$DEMO_HOME/state-hdfs" ] \
    || { [ -d "$dir" ] && [ ! -L "$dir" ] && [ -f "$dir/$MARK" ]; }; then
    rm -rf -- "$dir"
    echo "  removed $dir"
  else
    echo "  kept $dir: the demo did not create it (it holds no $MARK file)"
  fi
}

clean() {
  echo "Cleaning up the demo"
  if [ -d "$STATE/broker" ] && [ -x "$LS" ]; then
    if [ "$("$LS" broker stop --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["stopped"])')" = True ]; then
      echo "  stopped the demo's broker"
    else
      echo "  the demo's broker was not running"
    fi
  fi
  if [ -d "$STATE/pulsar" ] && [ -x "$LS" ]; then
    if [ "$("$LS" pulsar stop --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["stopped"])')" = True ]; then
      echo "  stopped the demo's Pulsar standalone"
    else
      echo "  the demo's Pulsar standalone was not running"
    fi
  fi
  if [ "$BACKEND" != local ] && [ -d "$SERVER_DIR" ] && [ -x "$PY" ]; then
    # A run killed outright (SIGKILL) leaves its server running; the warehouse is in the state dir.
    if [ "$(server stop)" = stopped ]; then echo "  stopped the demo's $BACKEND server"; fi
  fi
  remove_demo_dir "$STATE"
  [ "$BACKEND" != local ] || remove_demo_dir "$WAREHOUSE"
  rmdir -- "$DEMO_HOME" 2>/dev/null || true
}

# -- the S3 or HDFS server (--warehouse s3|hdfs) -------------------------------------------------

SERVER_STARTED=""
server() { "$PY" -m "logstore_cli.storage.${BACKEND}_server" "$@"; }
stop_server() { # the demo's server only (the pid it recorded); the data stays for the next run
  if [ -n "$SERVER_STARTED" ]; then
    SERVER_STARTED=""
    server stop >/dev/null || echo "demo: could not stop the $BACKEND server of $SERVER_DIR" >&2
  fi
}
start_server() {
  SERVER_STARTED=1 # from here on it is stopped at the end, however the demo ends
  server stop >/dev/null # one that a killed run left behind
  if [ "$BACKEND" = s3 ]; then
    server start --keep >/dev/null
    # The standard AWS variables every command reads (new keys at each start; never printed).
    # shellcheck disable=SC1091
    . "$SERVER_DIR/s3.env"
    "$PY" -c 'import os, sys
from logstore_cli.storage.s3 import S3Settings, make_client
client = make_client(S3Settings.from_env(dict(os.environ)))
if sys.argv[1] not in {b["Name"] for b in client.list_buckets().get("Buckets", ())}:
    client.create_bucket(Bucket=sys.argv[1])' "$BUCKET"
    WAREHOUSE=s3://$BUCKET/warehouse
    say "S3 server (versitygw) at $AWS_ENDPOINT_URL, pid $(json "$SERVER_DIR/server.json" 'd["pid"]'), bucket $BUCKET" \
      "AWS_ENDPOINT_URL, AWS_REGION and the keys come from $SERVER_DIR/s3.env (never printed)"
  else
    server start >/dev/null
    local uri
    uri=$(json "$SERVER_DIR/server.json" 'd["uri"]')
    WAREHOUSE=$uri/$BUCKET/warehouse
    say "HDFS at $uri, pid $(json "$SERVER_DIR/server.json" 'd["pid"]')"
  fi
  export LOGSTORE_WAREHOUSE=$WAREHOUSE
  say "warehouse: $WAREHOUSE"
}

# -- the Pulsar standalone (--log pulsar) ----------------------------------------------------------

PULSAR_STARTED=""
stop_pulsar() { # the demo's standalone only (its state dir's pid); the data stays for the next run
  if [ -n "$PULSAR_STARTED" ]; then
    PULSAR_STARTED=""
    "$LS" pulsar stop >/dev/null 2>&1 || echo "demo: could not stop the Pulsar standalone of $STATE/pulsar" >&2
  fi
}

if [ -n "$CLEAN" ]; then
  clean
  exit 0
fi

# -- progress ------------------------------------------------------------------------------------

SEED=${DEMO_SEED:-42}
CHANGES=${DEMO_CHANGES:-12000}
KEYS=${DEMO_KEYS:-500}
RATE=${DEMO_RATE:-100}
TABLE=demo.orders
JOB=demo-$(date +%Y%m%d-%H%M%S)
RUN=$STATE/demo-run # this run's --json outputs (replaced by the next run)
# With Pulsar the DDL is a copy of configs/demo-pulsar.sql naming the standalone's address (step 2).
if [ "$LOG" = kafka ]; then LOG_NAME=Kafka DDL=configs/demo.sql; else LOG_NAME=Pulsar DDL=$RUN/demo-pulsar.sql; fi
TOTAL_STEPS=10
[ "$BACKEND" = local ] || TOTAL_STEPS=11 # and the server's start
STEP=0
STEP_NAME=""
T0=$EPOCHREALTIME
if [ -t 1 ]; then BOLD=$'\e[1m' DIM=$'\e[2m' GREEN=$'\e[32m' OFF=$'\e[0m'; else BOLD="" DIM="" GREEN="" OFF=""; fi

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }'; }
step() {
  STEP=$((STEP + 1)) STEP_NAME=$1 STEP_T0=$EPOCHREALTIME
  printf '\n%s[%d/%d] %s%s\n%s      %s%s\n' "$BOLD" "$STEP" "$TOTAL_STEPS" "$1" "$OFF" "$DIM" "$2" "$OFF"
}
step_done() { printf '      %s✓ %s%s\n' "$GREEN" "$(since "$STEP_T0")" "$OFF"; }
say() { printf '      %s\n' "$@"; }

INGEST_PID=""
stop_ingest() { # SIGKILL the ingest's process group (the CLI, its Spark JVM, Spark's Python workers)
  if [ -n "$INGEST_PID" ]; then
    kill -KILL -- "-$INGEST_PID" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 -- "-$INGEST_PID" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    INGEST_PID=""
  fi
}
on_exit() {
  local rc=$?
  stop_ingest
  stop_server
  stop_pulsar
  if [ $rc -ne 0 ]; then
    printf '\ndemo: failed at step %d/%d (%s), exit %d; its outputs are in %s\n' \
      "$STEP" "$TOTAL_STEPS" "$STEP_NAME" "$rc" "$RUN" >&2
    printf 'demo: run it again, or clean up with: scripts/demo.sh --clean\n' >&2
  fi
}
trap on_exit EXIT
trap 'exit 130' INT TERM

json() { "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }

# -- the story -----------------------------------------------------------------------------------

printf '%slogstore demo%s: one table, two stores (a Delta table and a %s changelog), kept consistent\n' "$BOLD" "$OFF" "$LOG_NAME"
if [ -n "$WAREHOUSE" ]; then say "state: $STATE" "warehouse: $WAREHOUSE"; else say "state: $STATE" "warehouse: on the demo's $BACKEND server (step 3)"; fi

step "set-up" "scripts/setup.sh: .venv with logstore, the Delta and Kafka jars from Maven (once; then nothing to do)"
./scripts/setup.sh
for dir in "$STATE" ${WAREHOUSE:+"$WAREHOUSE"}; do
  if [ ! -e "$dir" ]; then mkdir -p -m 700 -- "$dir" && : >"$dir/$MARK"; fi
done
rm -rf -- "$RUN" && mkdir -p -- "$RUN"
step_done

if [ "$LOG" = kafka ]; then
  step "local Kafka broker" "a real single-node Kafka (KRaft) on 127.0.0.1, its data in the state dir; kept running between runs"
  if "$LS" broker status --json >"$RUN/broker.json" 2>/dev/null; then
    say "already running"
  else
    "$LS" broker start --json >"$RUN/broker.json"
  fi
  say "broker at $(json "$RUN/broker.json" 'd["bootstrap"]'), pid $(json "$RUN/broker.json" 'd["pid"]')"
  step_done
else
  step "local Pulsar standalone" "logstore pulsar start: Pulsar's own standalone (a broker, a bookie, RocksDB metadata) on 127.0.0.1,
      its data in the state dir; ready when its public/default namespace exists; stopped when the demo ends, however it ends"
  PULSAR_STARTED=1 # from here on it is stopped at the end, however the demo ends
  if "$LS" pulsar status --json >"$RUN/pulsar.json" 2>/dev/null; then
    say "already running (left by a run that was killed outright)"
  else
    "$LS" pulsar stop >/dev/null 2>&1 || true # one that runs but does not answer
    "$LS" pulsar start --json >"$RUN/pulsar.json"
  fi
  PULSAR_URL=$(json "$RUN/pulsar.json" 'd["service_url"]')
  say "Pulsar at $PULSAR_URL (admin API $(json "$RUN/pulsar.json" 'd["web_url"]')), pid $(json "$RUN/pulsar.json" 'd["pid"]')"
  # Amoro's DDL names the service; the standalone's first start took free ports (kept since).
  sed "s|pulsar://127\.0\.0\.1:6650|$PULSAR_URL|" configs/demo-pulsar.sql >"$DDL"
  say "the DDL: configs/demo-pulsar.sql with this address, in $DDL"
  step_done
fi

if [ "$BACKEND" = s3 ]; then
  step "the S3 server" "scripts/s3-server.sh: versitygw (atomic conditional writes, as the writer lease needs) on 127.0.0.1,
      fresh keys, the buckets of the last run kept in the state dir; stopped when the demo ends, however it ends"
  start_server
  step_done
elif [ "$BACKEND" = hdfs ]; then
  step "the HDFS server" "scripts/hdfs-server.sh: a NameNode and a DataNode (MiniDFSCluster) in one JVM on 127.0.0.1,
      the data of the last run kept in the state dir; stopped when the demo ends, however it ends"
  start_server
  step_done
fi

if [ "$LOG" = kafka ]; then
  step "validate the DDL" "configs/demo.sql: demo.orders in Amoro's Spark shape (USING delta TBLPROPERTIES 'log-store.enabled'),
      demo.users in Paimon's Flink shape (WITH 'log.system' = 'kafka'); errors would point at FILE:LINE:COL"
else
  step "validate the DDL" "demo.orders in Amoro's Spark shape with Amoro's Pulsar properties ('log-store.type' = 'pulsar',
      'log-store.address' = 'pulsar://…'); errors would point at FILE:LINE:COL"
fi
"$LS" validate "$DDL"
step_done

step "create-table" "each table: a Delta table (Change Data Feed on, the DDL's properties) and its $LOG_NAME topic;
      --if-not-exists: an identical table is left as it is (starts Spark when there is something to create)"
"$LS" create-table "$DDL" --if-not-exists
"$LS" list
step_done

GEN=(--source generate --total "$CHANGES" --keys "$KEYS" --rate "$RATE" --seed "$SEED"
  --update-ratio 0.6 --delete-ratio 0.2 --job "$JOB")

step "ingest, killed mid-run" "job $JOB: $CHANGES generated changes (inserts, updates, deletes; seed $SEED) at $RATE/s;
      each epoch goes to $LOG_NAME, then commits to Delta, then commit markers follow. SIGKILL lands mid-epoch."
set -m # the job in its own process group: the CLI and its JVM are killed together
"$LS" ingest "$TABLE" "${GEN[@]}" --trigger 1 --json >"$RUN/ingest-killed.jsonl" 2>"$RUN/ingest-killed.err" &
INGEST_PID=$!
set +m
disown "$INGEST_PID" # reaped by the shell; no job notice when it is killed
# Wait for the first committed epoch (the job's --json lines), printing epochs as they come.
"$PY" - "$RUN/ingest-killed.jsonl" "$INGEST_PID" "$LOG_NAME" <<'EOF'
import json, os, sys, time
path, pid, deadline, seen = sys.argv[1], int(sys.argv[2]), time.monotonic() + 300, 0
log_name = sys.argv[3]
while seen < 1:
    with open(path) as f:
        epochs = [e for e in map(json.loads, f.read().splitlines()) if e["event"] == "epoch"]
    for e in epochs[seen:]:
        print(f"      epoch {e['epoch']}: {e['log_records']:,} records to {log_name}, Delta version "
              f"{e['delta_version']}, markers out ({e['seconds']:.1f} s)", flush=True)
    seen = len(epochs)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        err = open(path[:-6] + ".err").read().strip().splitlines()[-5:]
        sys.exit("demo: the ingest job ended before its first epoch:\n" + "\n".join(err))
    if time.monotonic() > deadline:
        sys.exit("demo: no epoch committed within 300 s")
    time.sleep(0.2)
EOF
# Then for records of the next epoch in the log, not committed to Delta yet (logstore status:
# per partition, what the topic holds after the last commit's records and its marker).
in_flight='import json, sys; d = json.load(sys.stdin); parts = (d["log"] or {}).get("partitions") or []
print(sum(max(0, p["after_commit"] - 1) for p in parts if p["after_commit"] is not None))'
deadline=$((SECONDS + 60))
while [ $SECONDS -lt $deadline ]; do
  [ "$("$LS" status "$TABLE" --json | "$PY" -c "$in_flight")" -gt 0 ] && break
  kill -0 "$INGEST_PID" 2>/dev/null || { echo "demo: the ingest job ended before it was killed" >&2; exit 1; }
  sleep 0.2
done
killed_pid=$INGEST_PID
stop_ingest
"$LS" status "$TABLE" --json >"$RUN/status-killed.json"
killed_records=$("$PY" -c "$in_flight" <"$RUN/status-killed.json")
say "SIGKILL to process group $killed_pid: the ingest CLI and its Spark JVM" \
  "last commit: epoch $(json "$RUN/status-killed.json" 'd["last_commit"]["epoch"]'), Delta version $(json "$RUN/status-killed.json" 'd["delta"]["version"]')"
if [ "$killed_records" -gt 0 ]; then
  say "the killed attempt of the next epoch left $killed_records records in the log that Delta never committed"
else
  say "the kill landed just after a commit: no records to retract this time"
fi
step_done

step "ingest, restarted" "the same command and --job: the checkpoint resumes it; the killed epoch runs again as a new attempt,
      the rest of the $CHANGES changes follow (--once: until the source's end, then exit 0)"
EPOCH_LINES=$(
  cat <<'EOF'
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["event"] == "epoch":
        what = "markers re-published (it had committed)" if e["republished"] else f"{e['log_records']:,} records"
        print(f"      epoch {e['epoch']} (attempt {e['attempt']}): {what}, Delta version "
              f"{e['delta_version']} ({e['seconds']:.1f} s)", flush=True)
    elif e["event"] == "done":
        print(f"      done: {e['rows']:,} records in {e['epochs']} epoch(s)", flush=True)
EOF
)
"$LS" ingest "$TABLE" "${GEN[@]}" --once --json | tee "$RUN/ingest-restarted.jsonl" | "$PY" -c "$EPOCH_LINES"
step_done

if [ "$LOG" = kafka ]; then CLIENT=confluent-kafka; else CLIENT=pulsar-client; fi
step "read --mode log --consistent" "the $LOG_NAME log at the table's level: eventual (Amoro's consistency guarantee) emits at once
      and retracts the killed attempt's records when its retry shows up; no JVM, $CLIENT"
"$LS" read "$TABLE" --mode log --consistent --output jsonl >"$RUN/log.jsonl"
"$PY" - "$RUN/log.jsonl" <<'EOF'
import json, sys
retractions = (c for c in map(json.loads, open(sys.argv[1])) if c.get("retraction"))
for n, c in zip(range(3), retractions):
    if n == 0:
        print("      the first retractions: the killed attempt's records withdrawn, newest first")
    print(f"        {c['kind']} id={c['row']['id']}  (partition {c['partition']}, offset "
          f"{c['offset']}: epoch {c['epoch']} of writer {c['writer']})")
EOF
if [ "$LOG" = pulsar ]; then
  # Every level reads Pulsar the same way; the summary checks each against the Delta table.
  "$LS" read "$TABLE" --mode log --consistency committed --output jsonl >"$RUN/log-committed.jsonl"
  snapshot=$(json "$RUN/status-killed.json" 'd["delta"]["version"]')
  "$LS" read "$TABLE" --mode log --consistency committed --from "snapshot:$snapshot" --output jsonl >"$RUN/log-hybrid.jsonl"
  say "also read: level committed (only what Delta committed, exactly once), and hybrid: --from snapshot:$snapshot" \
    "(the Delta snapshot at the kill, then the log after it; message ids as 'ledger:entry:batch')" \
    "(read --engine spark and vacuum run on a Pulsar table too: docs/guide.md)"
fi
step_done

step "read --mode file" "the Delta table's snapshot (delta-rs: no JVM)"
"$LS" read "$TABLE" --mode file --output jsonl >"$RUN/file.jsonl"
step_done

step "verify" "the committed log (only what Delta committed, exactly once) folded by key against the Delta snapshot"
verify_rc=0
"$LS" verify "$TABLE" --json >"$RUN/verify.json" || verify_rc=$?
[ "$verify_rc" -le 1 ] || exit "$verify_rc"
say "$(json "$RUN/verify.json" '("equal" if d["equal"] else "NOT equal: " + str(d["reason"] or "")) + " at Delta version " + str(d["delta_version"])')"
step_done

step "summary" "the two stores side by side, from the --json outputs in $RUN"
"$PY" - "$RUN" "$CHANGES" "$JOB" "$verify_rc" "$killed_records" "$LOG_NAME" <<'EOF'
import json, sys
from pathlib import Path

run, changes, job = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
verify_rc, killed_records, log_name = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
KEY = "id"  # demo.orders' primary key


def lines(name):
    return [json.loads(line) for line in (run / name).read_text().splitlines() if line.strip()]


def fold(changes):
    """The changes, retractions applied, folded by key."""
    out = {}
    for c in changes:
        if c["kind"] in ("+I", "+U"):
            out[c["row"][KEY]] = c["row"]
        else:
            out.pop(c["row"][KEY], None)
    return out


log = lines("log.jsonl")
folded = fold(log)  # the log at eventual
retracted = sum(1 for c in log if c.get("retraction"))
file_rows = [c["row"] for c in lines("file.jsonl")]
delta = {r[KEY]: r for r in file_rows}
v = json.loads((run / "verify.json").read_text())
# An epoch the killed job committed after the last status but before Spark checkpointed it is
# run again by the restarted job, which finds it committed and only publishes its markers again
# ("republished"): the same epoch, not one more.
ingested = [e for name in ("ingest-killed.jsonl", "ingest-restarted.jsonl") for e in lines(name)
            if e["event"] == "epoch" and not e.get("republished")]
vd, vl = v["delta"] or {}, v["log"]
checks = {
    "verify: the committed log folded by key equals the Delta snapshot": verify_rc == 0 and v["equal"],
    "the eventual log, retractions applied, equals the Delta rows": folded == delta,
    "keys: log = Delta": len(folded) == len(delta) == len(file_rows) == vl["rows"] == vd.get("rows"),
    "epochs: committed in the log = committed to Delta": vl["epochs"] == vd.get("epochs"),
    "retracted (eventual) = dropped (committed)": retracted == vl["dropped"],
}
for name, what in (("log-committed.jsonl", "committed"), ("log-hybrid.jsonl", "hybrid (snapshot, then the log)")):
    if (run / name).exists():  # the Pulsar story reads these too
        checks[f"the {what} read, folded by key, equals the Delta rows"] = fold(lines(name)) == delta
rows = [
    ("", f"log ({log_name})", "file store (Delta)"),
    ("rows (= keys)", f"{len(folded):,}", f"{len(file_rows):,}"),
    ("keys, committed read", f"{vl['rows']:,}", f"{vd.get('rows', 0):,}"),
    ("epochs committed", f"{vl['epochs']:,}", f"{vd.get('epochs', 0):,}"),
    ("change records", f"{vl['records']:,} (+{vl['markers']:,} markers)", f"version {v['delta_version']}"),
    ("killed attempts' records", f"{retracted:,} retracted (eventual)", f"{vl['dropped']:,} dropped (committed)"),
]
width = [max(len(r[i]) for r in rows) for i in range(3)]
for r in rows:
    print("      " + "  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip())
print(f"      this run: job {job}, {changes:,} changes, {sum(e['log_records'] for e in ingested):,} records "
      f"in {len(ingested)} epochs committed by it; its killed attempt left {killed_records:,} records")
for name, ok in checks.items():
    print(f"      {'ok  ' if ok else 'FAIL'} {name}")
agree = all(checks.values())
summary = {"agree": agree, "checks": checks, "log_rows": len(folded), "delta_rows": len(file_rows),
           "log_keys_committed": vl["rows"], "delta_keys": vd.get("rows"), "log_epochs": vl["epochs"],
           "delta_epochs": vd.get("epochs"), "retracted": retracted, "dropped": vl["dropped"],
           "records": vl["records"], "committed_changes": vl["changes"], "delta_version": v["delta_version"], "job": job,
           "changes": changes, "run_records": sum(e["log_records"] for e in ingested),
           "run_epochs": len(ingested), "killed_records": killed_records}
(run / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
if not agree:
    sys.exit("\n      the log and the file store DISAGREE: see the FAIL lines above")
print("\n      the log and the file store agree.")
EOF
step_done

stop_server # before the epilogue: the demo's server runs only while the demo does
stop_pulsar
printf '\n%sdemo done in %s.%s\n' "$BOLD" "$(since "$T0")" "$OFF"
if [ "$ORIG_PWD" = "$ROOT" ]; then here=.venv/bin/logstore demo=scripts/demo.sh; else here=$LS demo=$ROOT/scripts/demo.sh; fi
[ "$BACKEND" = local ] || demo="$demo --warehouse $BACKEND"
[ "$LOG" = kafka ] || demo="$demo --log $LOG"
if [ "$LOG" = pulsar ]; then
  look="Look around (the demo stopped its Pulsar standalone; start it again over the demo's topics):
    export LOGSTORE_STATE_DIR=$STATE LOGSTORE_WAREHOUSE=$WAREHOUSE
    $here pulsar start"
elif [ "$BACKEND" = local ]; then
  look="Look around (the demo's tables live in its own state and warehouse):
    export LOGSTORE_STATE_DIR=$STATE LOGSTORE_WAREHOUSE=$WAREHOUSE"
elif [ "$BACKEND" = s3 ]; then
  look="Look around (the demo stopped its S3 server; start it again over the demo's buckets):
    export LOGSTORE_STATE_DIR=$STATE LOGSTORE_WAREHOUSE=$WAREHOUSE
    ${ROOT/#"$ORIG_PWD"\//}/scripts/s3-server.sh start --keep && . $SERVER_DIR/s3.env"
else
  look="Look around (the demo stopped its HDFS; start it again over the demo's data, on a new port):
    export LOGSTORE_STATE_DIR=$STATE
    ${ROOT/#"$ORIG_PWD"\//}/scripts/hdfs-server.sh start
    export LOGSTORE_WAREHOUSE=<the hdfs:// URI it prints>/$BUCKET/warehouse"
fi
cat <<EOF
  $look
    $here status $TABLE
    $here read $TABLE --mode log --consistency committed --limit 10
  Run it again: $demo   (a new ingest job of the same changes; the stores still agree)
  Clean up:     $demo --clean   (stops the demo's broker, removes its state and warehouse)
EOF
