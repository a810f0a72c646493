#!/usr/bin/env bash
# The whole test-suite, as CI runs it: set-up, lint, types, unit and integration tests.
# Integration tests start their own Kafka broker (or use LOGSTORE_TEST_BOOTSTRAP) and a local Spark.
# Extra arguments go to pytest, e.g. scripts/test.sh -m unit
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
# Derandomized Hypothesis unless asked otherwise (tests/hypothesis_profiles.py: ci, dev, thorough).
# The slowest tests are listed at the end: the suite must stay well inside CI's time.
HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" .venv/bin/python -m pytest --durations=15 "$@"
