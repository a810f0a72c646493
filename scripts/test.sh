#!/usr/bin/env bash
# The whole test-suite, as CI runs it: set-up, lint, types, unit and integration tests.
# Integration tests start their own Kafka broker (or use LOGSTORE_TEST_BOOTSTRAP) and a local Spark.
# Extra arguments go to pytest, e.g. scripts/test.sh -m unit
set -euo pipefail
cd "$(dirname "$0")/.."

LOGSTORE_S3_BUILD=background ./scripts/setup.sh
# PyFlink in a venv of its own for the Flink consumer tests (-m flink); they then must run, not skip.
# LOGSTORE_SKIP_FLINK=1 leaves it out (the Flink tests are then skipped, saying so).
if [ "${LOGSTORE_SKIP_FLINK:-0}" != "1" ]; then
  echo "== flink-env"
  ./scripts/flink-env.sh
  export LOGSTORE_FLINK_REQUIRED=1
fi
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
# Derandomized Hypothesis unless asked otherwise (tests/hypothesis_profiles.py: ci, dev, thorough).
# The slowest tests are listed at the end: the suite must stay well inside CI's time.
# Two pytest-xdist workers by default (LOGSTORE_TEST_WORKERS=0: one process, e.g. for a debugger);
# tests/plugins/scheduling.py says how the tests split between them.
HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" .venv/bin/python -m pytest --durations=15 \
  -n "${LOGSTORE_TEST_WORKERS:-2}" --dist loadgroup "$@"
