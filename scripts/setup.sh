#!/usr/bin/env bash
# Set up everything logstore needs on this machine, idempotently:
#   .venv with the package (editable) and its dev extras, and the JVM jars from Maven Central.
# A second run with nothing changed does no network work.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "setup: error: $*" >&2; exit 1; }

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then PY="$candidate"; break; fi
  done
fi
[ -n "$PY" ] || die "no python3 found; install Python 3.11 or set PYTHON=/path/to/python"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || die "$PY is $("$PY" --version 2>&1); logstore needs Python >= 3.11 (set PYTHON=...)"
command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] \
  || die "no Java found; install a Java 17 runtime (Spark 4 and Kafka 4 need it)"
command -v mvn >/dev/null 2>&1 || die "no Maven ('mvn') found; it fetches the Delta and Kafka jars"

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PY"
  "$PY" -m venv .venv
fi

# Reinstall only when what pip installs from changed: pyproject.toml's [project] and
# [build-system] tables (a new pytest marker or lint rule in [tool.*] needs no reinstall).
stamp=.venv/.logstore-install-stamp
want="$("$PY" -c 'import hashlib, json, tomllib
d = tomllib.load(open("pyproject.toml", "rb"))
key = json.dumps([d.get("project"), d.get("build-system")], sort_keys=True)
print(hashlib.sha256(key.encode()).hexdigest()[:16])')"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  echo "setup: installing logstore and its dependencies into .venv"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[dev]'
  echo "$want" > "$stamp"
fi

# With LOGSTORE_WAREHOUSE=s3://… (or a config naming one, LOGSTORE_CONFIG) this also resolves
# Spark's s3a:// jars (hadoop-aws and the 558 MB AWS SDK bundle); a local warehouse never needs them.
.venv/bin/logstore setup

# The S3 server of the s3 tests (versitygw, built with Go once into ~/.cache/logstore/bin; a few
# CPU-minutes the first time, nothing afterwards). Without Go the s3 tests fail saying so.
# LOGSTORE_S3_BUILD=background (scripts/test.sh): at the lowest CPU priority, behind the tests that
# come before the s3 ones, which wait for it (one build lock) or build it themselves if it failed.
if command -v go >/dev/null 2>&1; then
  if [ "${LOGSTORE_S3_BUILD:-now}" = "background" ]; then
    log="$(mktemp -t logstore-s3-build.XXXXXX)"
    echo "setup: building the S3 test server in the background (log: $log)"
    nohup nice -n 19 .venv/bin/python -m logstore_cli.storage.s3_server build >"$log" 2>&1 &
  else
    .venv/bin/python -m logstore_cli.storage.s3_server build >/dev/null
  fi
else
  echo "setup: note: no Go found; the S3 tests (pytest -m s3) need it to build their server" >&2
fi
