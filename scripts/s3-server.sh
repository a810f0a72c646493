#!/usr/bin/env bash
# Build, start, stop or show the local S3-protocol server (versitygw v1.8.0, loopback only).
#   scripts/s3-server.sh build    # 'go install' once into ~/.cache/logstore/bin (a few CPU-minutes)
#   scripts/s3-server.sh start    # on 127.0.0.1:<free port>, fresh keys, empty data dir
#   scripts/s3-server.sh start --keep   # the same, over the buckets of the last start
#   scripts/s3-server.sh stop | status
# State lives in $LOGSTORE_STATE_DIR/s3-server (default ~/.local/state/logstore/s3-server); after a
# start, 'source' its s3.env for AWS_ENDPOINT_URL, AWS_REGION and the keys (never printed).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x "$root/.venv/bin/python" ] || (cd "$root" && ./scripts/setup.sh >&2)
exec "$root/.venv/bin/python" -m logstore_cli.storage.s3_server "$@"
