"""ReaderCheckpoint: a following read's decider state in a private file, written whole or not at
all, never through a symlink, refused when it belongs to another table, topic or level."""

from __future__ import annotations

import json
import os
import stat
from decimal import Decimal
from pathlib import Path

import pytest

from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.logformat.consistency import TopicDecider
from logstore_cli.logformat.wire import ChangeRecord, CommitMarker, EpochId, RowKind
from logstore_cli.read.consumer import ReaderCheckpoint, ReaderDecider

TABLE = "db.orders"
TOPIC = "orders-log"


def _record(i: int, epoch: EpochId) -> ChangeRecord:
    return ChangeRecord(RowKind.INSERT, {"id": i}, {"id": i, "price": Decimal(f"{i}.50")}, epoch)


def _decider(level: str = "committed") -> ReaderDecider:
    """Partition 0: epoch 0 committed, epoch 1 open (held); partition 3: nothing read yet but a
    position (a following read that started at its end)."""
    decider = ReaderDecider(level)
    first, second = EpochId("w", 0, "a"), EpochId("w", 1, "b")
    decider.feed(0, 0, _record(1, first))
    decider.feed(0, 1, CommitMarker(first, 4))
    decider.feed(0, 2, _record(2, second))
    decider.positions.update({0: 4, 3: 17})  # offset 3 was a foreign record
    return decider


def _checkpoint(path: Path, **changes: str) -> ReaderCheckpoint:
    names = {"table": TABLE, "topic": TOPIC, "level": "committed", **changes}
    return ReaderCheckpoint(path, table=names["table"], topic=names["topic"], level=names["level"])  # type: ignore[arg-type]


def test_a_missing_checkpoint_loads_as_none(tmp_path: Path) -> None:
    assert _checkpoint(tmp_path / "read.json").load() is None


def test_round_trip_restores_the_decider_and_the_positions(tmp_path: Path) -> None:
    path = tmp_path / "read.json"
    decider = _decider()
    _checkpoint(path).save(decider)

    loaded = _checkpoint(path).load()
    restored = ReaderDecider.restore(loaded)
    assert restored.state() == decider.state()
    assert restored.positions == {0: 4, 3: 17}
    assert [p.epoch for p in restored.pending()[0]] == [1]
    # The restored decider goes on as the saved one: the marker of epoch 1 releases its record.
    out = restored.feed(0, 5, CommitMarker(EpochId("w", 1, "b"), 5))
    assert [(e.offset, e.record.row["price"]) for e in out] == [(2, Decimal("2.50"))]
    body = json.loads(path.read_text("utf-8"))
    assert (body["table"], body["topic"], body["level"]) == (TABLE, TOPIC, "committed")


def test_a_plain_topic_decider_state_is_accepted(tmp_path: Path) -> None:
    plain = TopicDecider("eventual")
    plain.feed(1, 0, _record(1, EpochId("w", 0, "a")))
    path = tmp_path / "read.json"
    _checkpoint(path, level="eventual").save(plain)
    restored = ReaderDecider.restore(_checkpoint(path, level="eventual").load())
    assert restored.positions == {}
    assert restored.partition(1).position == 1


def test_the_file_is_private_and_missing_directories_are_created_private(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "read.json"
    _checkpoint(path).save(_decider())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for directory in (tmp_path / "a", tmp_path / "a" / "b"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_an_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    _checkpoint(shared / "read.json").save(_decider())
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755


def test_saving_again_replaces_the_file_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "read.json"
    store = _checkpoint(path)
    store.save(TopicDecider("committed"))
    decider = _decider()
    store.save(decider)
    assert store.load() == json.loads(json.dumps(decider.state()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["read.json"]


def test_a_failed_save_leaves_the_previous_checkpoint_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "read.json"
    store = _checkpoint(path)
    store.save(TopicDecider("committed"))
    before = path.read_bytes()

    def no_rename(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(LogstoreError, match="cannot save the read's checkpoint") as info:
        store.save(_decider())
    assert "No space left on device" in info.value.message
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["read.json"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("table", "db.customers"), ("topic", "other-log"), ("level", "eventual")],
)
def test_a_checkpoint_of_another_read_is_refused(tmp_path: Path, field: str, value: str) -> None:
    path = tmp_path / "read.json"
    _checkpoint(path, **{field: value}).save(
        TopicDecider(value if field == "level" else "committed")
    )
    with pytest.raises(InvalidInputError) as info:
        _checkpoint(path).load()
    message = info.value.message
    assert str(path) in message
    assert (
        value in message
        and {"table": TABLE, "topic": TOPIC, "level": "committed"}[field] in message
    )
    assert info.value.hint and "--checkpoint" in info.value.hint


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "not a format-1 checkpoint"),
        (json.dumps({"format": 9}).encode(), "not a format-1 checkpoint"),
        (
            json.dumps({"format": 1, "table": TABLE, "topic": TOPIC}).encode(),
            "names no level",
        ),
        (
            json.dumps(
                {"format": 1, "table": TABLE, "topic": TOPIC, "level": "committed", "state": {}}
            ).encode(),
            "state.format",
        ),
    ],
)
def test_a_damaged_checkpoint_is_a_clear_error(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "read.json"
    path.write_bytes(content)
    with pytest.raises(InvalidInputError) as info:
        _checkpoint(path).load()
    assert str(path) in info.value.message and why in info.value.message
    assert info.value.hint and "delete it" in info.value.hint


def test_damaged_reader_positions_are_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "read.json"
    _checkpoint(path).save(_decider())
    body = json.loads(path.read_text("utf-8"))
    body["state"]["reader_positions"] = {"0": -5}
    path.write_text(json.dumps(body), "utf-8")
    with pytest.raises(InvalidInputError, match="reader_positions"):
        _checkpoint(path).load()


def test_a_symlink_is_neither_read_nor_written_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    _checkpoint(target).save(_decider())
    before = target.read_bytes()
    link = tmp_path / "read.json"
    link.symlink_to(target)

    with pytest.raises(InvalidInputError, match="symbolic link"):
        _checkpoint(link).load()
    with pytest.raises(InvalidInputError, match="symbolic link"):
        _checkpoint(link).save(TopicDecider("committed"))
    assert link.is_symlink() and target.read_bytes() == before


def test_a_directory_is_not_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "read.json"
    path.mkdir()
    with pytest.raises(InvalidInputError, match="not a regular file"):
        _checkpoint(path).save(TopicDecider("committed"))
    with pytest.raises(InvalidInputError):
        _checkpoint(path).load()
