"""The consumer engine's source meets a record with a column its schema lacks (a column added
after the read started): it reads the table's schema again and decodes the record with it; a
column the table does not have either is malformed, and the schema is not read again at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from logstore_cli.logformat.wire import ChangeRecord, EpochId, RowKind, RowSchema, encode_change
from logstore_cli.read.consumer import LogSource, ReadStats, SourceConf

pytestmark = pytest.mark.unit

OLD = RowSchema((("id", "bigint"), ("name", "string")), ("id",), frozenset({"name"}))
NEW = RowSchema((("id", "bigint"), ("name", "string"), ("region", "string")), ("id",),
                frozenset({"name", "region"}))  # fmt: skip


@dataclass
class Msg:
    k: bytes | None
    v: bytes
    h: list[tuple[str, bytes]]

    def key(self) -> bytes | None:
        return self.k

    def value(self) -> bytes:
        return self.v

    def headers(self) -> list[tuple[str, bytes]]:
        return self.h


def _msg(row: dict[str, Any], schema: RowSchema) -> Msg:
    record = ChangeRecord(RowKind.INSERT, {"id": row["id"]}, row, EpochId("w", 1, "a"))
    return Msg(*encode_change(record, schema))


def test_a_record_with_an_added_column_is_decoded_with_the_schema_read_again() -> None:
    reads: list[RowSchema] = []

    def reload() -> RowSchema:
        reads.append(NEW)
        return NEW

    with LogSource(SourceConf("127.0.0.1:9", {}, "t", 1.0), OLD, reload_schema=reload) as source:
        stats = ReadStats()
        old = source._decode(_msg({"id": 1, "name": "a"}, OLD), 0, 0, stats)
        new = source._decode(_msg({"id": 2, "name": "b", "region": "eu"}, NEW), 0, 1, stats)
        after = source._decode(_msg({"id": 3, "name": "c"}, OLD), 0, 2, stats)
    assert isinstance(old, ChangeRecord) and old.row == {"id": 1, "name": "a"}
    assert isinstance(new, ChangeRecord) and new.row == {"id": 2, "name": "b", "region": "eu"}
    assert isinstance(after, ChangeRecord) and after.row["region"] is None  # written before
    assert source.schema == NEW and len(reads) == 1 and stats.records == 3


def test_a_column_the_table_lacks_too_is_malformed_and_not_read_again_at_once() -> None:
    reads: list[RowSchema] = []

    def reload() -> RowSchema:
        reads.append(OLD)
        return OLD

    bad = RowSchema((("id", "bigint"), ("name", "string"), ("zzz", "int")), ("id",))
    with LogSource(SourceConf("127.0.0.1:9", {}, "t", 1.0), OLD, reload_schema=reload) as source:
        stats = ReadStats()
        for offset in range(3):
            assert (
                source._decode(_msg({"id": 1, "name": "a", "zzz": 1}, bad), 0, offset, stats)
                is None
            )
    assert stats.malformed == 3 and stats.records == 0
    assert len(reads) == 1  # once a second at most


def test_a_value_too_wide_for_the_readers_type_is_decoded_with_the_widened_schema() -> None:
    narrow = RowSchema((("id", "bigint"), ("qty", "int")), ("id",), frozenset({"qty"}))
    wide = RowSchema((("id", "bigint"), ("qty", "bigint")), ("id",), frozenset({"qty"}))
    reads: list[RowSchema] = []

    def reload() -> RowSchema:
        reads.append(wide)
        return wide

    with LogSource(SourceConf("127.0.0.1:9", {}, "t", 1.0), narrow, reload_schema=reload) as source:
        stats = ReadStats()
        old = source._decode(_msg({"id": 1, "qty": 7}, narrow), 0, 0, stats)
        big = source._decode(_msg({"id": 2, "qty": 5_000_000_000}, wide), 0, 1, stats)
        again = source._decode(_msg({"id": 3, "qty": 6_000_000_000}, wide), 0, 2, stats)
    assert isinstance(old, ChangeRecord) and old.row["qty"] == 7
    assert isinstance(big, ChangeRecord) and big.row["qty"] == 5_000_000_000
    assert isinstance(again, ChangeRecord) and again.row["qty"] == 6_000_000_000
    assert source.schema == wide and len(reads) == 1 and stats.malformed == 0


def test_a_value_out_of_range_for_the_table_too_is_malformed_and_read_again_once() -> None:
    narrow = RowSchema((("id", "bigint"), ("qty", "int")), ("id",), frozenset({"qty"}))
    wide = RowSchema((("id", "bigint"), ("qty", "bigint")), ("id",), frozenset({"qty"}))
    reads: list[RowSchema] = []

    def reload() -> RowSchema:
        reads.append(narrow)
        return narrow

    with LogSource(SourceConf("127.0.0.1:9", {}, "t", 1.0), narrow, reload_schema=reload) as source:
        stats = ReadStats()
        for offset in range(2):
            msg = _msg({"id": 1, "qty": 5_000_000_000}, wide)
            assert source._decode(msg, 0, offset, stats) is None
    assert stats.malformed == 2 and len(reads) == 1
