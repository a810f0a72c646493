#!/usr/bin/env bash
# A PyFlink 2.2.1 environment for the opt-in Flink consumer test (tests/integration/flink/):
# a venv of its own (PyFlink pins py4j, pyarrow and pandas versions that clash with pyspark) and
# the Kafka SQL connector jar from Maven Central. Idempotent; prints the venv's python and the jar.
#   scripts/flink-env.sh            # prepare (downloads ~320 MB the first time)
#   LOGSTORE_FLINK_HOME=DIR ...     # where (default ~/.cache/logstore/flink)
set -euo pipefail
home="${LOGSTORE_FLINK_HOME:-$HOME/.cache/logstore/flink}"
venv="$home/venv"
jar="$home/flink-sql-connector-kafka-5.0.0-2.2.jar"
url="https://repo1.maven.org/maven2/org/apache/flink/flink-sql-connector-kafka/5.0.0-2.2/flink-sql-connector-kafka-5.0.0-2.2.jar"
mkdir -p "$home"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import pyflink" 2>/dev/null; then
    python3.11 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet "apache-flink==2.2.1"
fi
if [[ ! -s "$jar" ]]; then
    curl --fail --silent --show-error --location --retry 3 -o "$jar.part" "$url"
    mv "$jar.part" "$jar"
fi
echo "python=$venv/bin/python"
echo "jar=$jar"
