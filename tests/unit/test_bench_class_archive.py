"""scripts/bench_class_archive.py's pure parts: the epochs it ingests, the rounds' order, and how it
turns the archive off (a user's own class-sharing option, which logstore leaves alone)."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from logstore_cli.jvm import class_archive
from tests.unit.scripts_support import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_class_archive")


def test_each_epoch_inserts_new_keys_then_updates_one(bench: ModuleType) -> None:
    rows = [json.loads(line) for line in bench.epoch_lines(2, changes=5).splitlines()]
    assert [r["op"] for r in rows] == ["+I", "+I", "+I", "+I", "+U"]
    assert [r["id"] for r in rows] == [2000, 2001, 2002, 2003, 2000]
    other = {json.loads(line)["id"] for line in bench.epoch_lines(1).splitlines()}
    assert not other & {r["id"] for r in rows}  # epochs never share a key


def test_the_ways_alternate_round_by_round(bench: ModuleType) -> None:
    assert bench.order(0) == ("with archive", "without")
    assert bench.order(1) == ("without", "with archive")
    assert bench.order(2) == bench.order(0)


def test_without_is_a_users_own_option_so_no_archive_is_added(bench: ModuleType) -> None:
    key, value = bench.WITHOUT[1].split("=", 1)
    assert bench.WITHOUT[0] == "--conf"
    assert class_archive.user_decides({key: value}, {})
