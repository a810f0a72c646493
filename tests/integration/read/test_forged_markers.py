"""Issue 18, items 2 and 3, against the real broker: commit markers anyone with write access to
the topic can produce, with the five ``logstore.*`` headers. A reader releases an epoch only when
the Delta log confirms it (docs/consistency.md §10, "What a reader trusts"):

- a forged marker for a real writer's later epoch hides none of that writer's next epochs, at
  ``committed`` or ``eventual``;
- an unknown writer's records and marker are never released at ``committed``;
- both are counted in ``read``'s summary and make ``verify`` fail with that cause.

The epochs are written by hand (delta-rs commits, the log's producer: no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog.tables import load_table
from logstore_cli.logformat.consistency import Level
from logstore_cli.logformat.wire import EpochId
from logstore_cli.read import plan
from logstore_cli.read.consumer import LogSource, SourceConf
from logstore_cli.read.service import ReadSummary, build_request, read_with_consumer
from logstore_cli.read.verify import VerifyResult, verify_table
from tests.e2e.cli_support import Writer, keyed_table
from tests.integration.read.test_log_protocol import Collect

WRITER = "w-0123456789abcdef"


def _rows(first: int, count: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}"} for i in range(first, first + count)]


def _read(tmp_path: Path, level: Level) -> tuple[list[int], ReadSummary]:
    stored = load_table(tmp_path / "wh", "db.orders")
    req = build_request(
        stored, mode="log", engine="consumer", output=plan.OutputSpec("jsonl"),
        consistent=False, consistency=level, changelog="all-kinds", start="earliest",
        follow=False, limit=None, checkpoint=None, as_of=None, changes=False, bootstrap=None,
        client_properties={}, timeout_s=15.0,
    )  # fmt: skip
    sink = Collect()
    summary = read_with_consumer(req, sink)
    assert not any(meta.get("retraction") for _, _, meta in sink.changes)
    return sorted(row["id"] for _, row, _ in sink.changes), summary


def _verify(tmp_path: Path, bootstrap: str) -> VerifyResult:
    stored = load_table(tmp_path / "wh", "db.orders")
    assert stored.spec.log_store is not None
    with LogSource(SourceConf(bootstrap, {}, stored.spec.log_store.topic, 15.0)) as source:
        return verify_table(stored, source)


@pytest.fixture
def writer(tmp_path: Path, kafka_bootstrap: str, topic_name: str) -> Any:
    log = keyed_table(tmp_path, kafka_bootstrap, topic_name)
    yield log
    log.close()


def test_a_forged_marker_for_a_later_epoch_hides_none_of_the_writers_next_epochs(
    tmp_path: Path, kafka_bootstrap: str, writer: Writer
) -> None:
    first = writer.epoch(EpochId(WRITER, 0, "a-0"), _rows(0, 2))
    # The forgery: epoch 5 of the real writer, "committed" as the version epoch 0 holds.
    writer.markers(EpochId(WRITER, 5, "a-forged"), first)
    for n in range(1, 6):  # the writer's next epochs: 10 rows
        writer.epoch(EpochId(WRITER, n, f"a-{n}"), _rows(2 * n, 2))

    for level in ("committed", "eventual"):
        ids, summary = _read(tmp_path, level)  # type: ignore[arg-type]
        assert ids == list(range(12)), level  # before: [0, 1], exit 0
        assert (summary.unconfirmed_markers, summary.unconfirmed_records) == (2, 0)
        assert summary.to_json()["log"]["unconfirmed"] == {"markers": 2, "records": 0}
        assert summary.pending_epochs == 0

    result = _verify(tmp_path, kafka_bootstrap)
    assert not result.equal
    assert result.diff is not None and result.diff.equal  # the data is Delta's
    assert result.reason is not None and result.reason.startswith(
        f"2 commit markers in topic {writer.topic} are not confirmed by the Delta log: "
        f"partition 0 offset "
    )
    assert f"epoch 5 of writer {WRITER} attempt a-forged as Delta version {first}, which holds " \
        f"epoch 0 of writer {WRITER} attempt a-0" in result.reason  # fmt: skip
    assert result.hint is not None and "ACLs" in result.hint
    assert result.log.unconfirmed_markers == 2


def test_an_unknown_writers_records_and_marker_are_not_released_at_committed(
    tmp_path: Path, kafka_bootstrap: str, writer: Writer
) -> None:
    real = EpochId(WRITER, 0, "a-0")
    version = writer.epoch(real, _rows(0, 3))
    intruder = EpochId("w-intruder", 0, "a-x")
    writer.records(intruder, _rows(100, 4))
    writer.markers(intruder, version)  # a real version: it holds the real writer's epoch
    writer.markers(EpochId("w-intruder", 1, "a-y"), version + 7)  # no such version

    ids, summary = _read(tmp_path, "committed")
    assert ids == [0, 1, 2]  # before: the intruder's rows 100..103 too, without a word
    assert (summary.unconfirmed_markers, summary.unconfirmed_records) == (4, 4)
    assert summary.pending_epochs >= 1  # the intruder's records, held: never committed

    result = _verify(tmp_path, kafka_bootstrap)
    assert not result.equal and result.diff is not None and result.diff.equal
    assert result.reason is not None
    assert "epoch 0 of writer w-intruder attempt a-x as Delta version" in result.reason
    assert "(4 records of the attempts they name were not folded)" in result.reason
    assert result.to_json()["log"]["unconfirmed"] == {"markers": 4, "records": 4}
