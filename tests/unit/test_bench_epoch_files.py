"""scripts/bench_epoch_files.py's pure parts: options, the epochs' changes, the file history."""

from __future__ import annotations

from types import ModuleType

import pytest

from .scripts_support import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_epoch_files")


def test_options_default_and_refuse_bad_values(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = bench.parse_args([])
    assert (opts.epochs, opts.contrast_epochs, opts.rows, opts.changes) == (1000, 200, 10_000, 100)
    for bad, message in ((["--epochs", "0"], "--epochs must be at least 1"),
                         (["--changes", "5"], "at least 10"),
                         (["--contrast-epochs", "-1"], "0 or more")):  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            bench.parse_args(bad)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_epochs_insert_new_keys_and_change_recent_live_ones_once(bench: ModuleType) -> None:
    rows, changes, recent = 300, 20, 50
    batches, left = bench.epoch_changes(rows, changes, epochs=40, recent=recent, seed=1)
    assert [r["op"] for r in batches[0]] == ["+I"] * rows
    live = {r["id"] for r in batches[0]}
    newest = rows
    for batch in batches[1:]:
        window = set(sorted(live)[-recent:])
        keys = [r["id"] for r in batch]
        assert len(batch) == changes and len(set(keys)) == changes  # each key once an epoch
        ops = [r["op"] for r in batch]
        assert (ops.count("+I"), ops.count("+U"), ops.count("-D")) == (12, 6, 2)
        for r in batch:
            if r["op"] == "+I":
                assert r["id"] == newest and r["id"] not in live
                newest += 1
                live.add(r["id"])
            else:
                assert r["id"] in window  # a live key among the newest
                if r["op"] == "-D":
                    live.discard(r["id"])
    assert left == len(live) == rows + 40 * (12 - 2)


def test_file_history_replays_adds_removes_and_counts_compactions(bench: ModuleType) -> None:
    def add(p: str) -> dict[str, object]:
        return {"add": {"path": p}}

    def remove(p: str) -> dict[str, object]:
        return {"remove": {"path": p}}

    commits = [
        [{"commitInfo": {"operation": "CREATE TABLE"}}],
        [{"commitInfo": {"operation": "MERGE"}}, add("a"), add("b")],
        [{"commitInfo": {"operation": "MERGE"}}, remove("b"), add("c"), add("d")],
        [{"commitInfo": {"operation": "OPTIMIZE"}}, remove("a"), remove("c"), remove("d"),
         add("e")],
    ]  # fmt: skip
    history = bench.file_history(commits)
    assert (history.files, history.peak, history.commits, history.compactions) == (1, 3, 4, 1)


def test_inserts_only_epochs_insert_new_keys_only(bench: ModuleType) -> None:
    batches, left = bench.epoch_changes(50, 10, epochs=5, recent=20, mix=bench.INSERTS_ONLY)
    later = [r for batch in batches[1:] for r in batch]
    assert [r["op"] for r in later] == ["+I"] * 50
    assert [r["id"] for r in later] == list(range(50, 100)) and left == 100
    assert bench.parse_args(["--inserts-only"]).inserts_only is True
