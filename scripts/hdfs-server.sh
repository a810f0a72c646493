#!/usr/bin/env bash
# Start, stop or show the local HDFS (Hadoop 3.4.1 MiniDFSCluster: one NameNode, one DataNode, one
# JVM, loopback only) for development and tests.
#   scripts/hdfs-server.sh start [--fresh]   # hdfs://127.0.0.1:<free port>; keeps the data unless --fresh
#   scripts/hdfs-server.sh stop | status
# The jars come from Maven Central into ~/.cache/logstore/jars the first time. State lives in
# $LOGSTORE_STATE_DIR/hdfs-server (default ~/.local/state/logstore/hdfs-server).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x "$root/.venv/bin/python" ] || (cd "$root" && ./scripts/setup.sh >&2)
exec "$root/.venv/bin/python" -m logstore_cli.storage.hdfs_server "$@"
