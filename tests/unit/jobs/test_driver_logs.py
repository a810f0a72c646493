"""Spark's driver logs: a private directory of this user, new files only, the newest few kept."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from logstore_cli.errors import ConfigError, StateDirError
from logstore_cli.jobs import spark as spark_mod
from logstore_cli.jobs.spark import (
    KEEP_DRIVER_LOGS,
    SparkSettings,
    driver_log_dir,
    new_driver_log,
    prune_driver_logs,
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_default_log_dir_is_private_under_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGSTORE_STATE_DIR", str(tmp_path / "state"))
    log_dir = driver_log_dir(SparkSettings())
    assert log_dir == tmp_path / "state" / "spark" / "logs"
    assert _mode(log_dir) == 0o700 and _mode(log_dir.parent) == 0o700


def test_a_shared_log_dir_is_narrowed_to_its_owner(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs").chmod(0o1777)  # like /tmp
    assert driver_log_dir(SparkSettings(work_dir=tmp_path)) == tmp_path / "logs"
    assert _mode(tmp_path / "logs") == 0o700


def test_another_users_log_dir_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "logs").mkdir()
    owner = os.lstat(tmp_path / "logs").st_uid
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)
    with pytest.raises(StateDirError, match="another user"):
        driver_log_dir(SparkSettings(log_dir=tmp_path / "logs"))


def test_a_symlinked_log_dir_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGSTORE_STATE_DIR", str(tmp_path / "state"))
    shared = tmp_path / "shared"
    shared.mkdir()
    (tmp_path / "state" / "spark").mkdir(parents=True)
    (tmp_path / "state" / "spark" / "logs").symlink_to(shared)
    with pytest.raises(StateDirError, match="symbolic link"):
        driver_log_dir(SparkSettings())
    assert list(shared.iterdir()) == []


def test_a_state_dir_below_a_file_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("LOGSTORE_STATE_DIR", str(tmp_path / "afile" / "below"))
    with pytest.raises(ConfigError, match="not a directory") as info:
        driver_log_dir(SparkSettings())
    assert info.value.exit_code == 2 and str(tmp_path / "afile") in info.value.message


def test_each_session_gets_a_new_private_log(tmp_path: Path) -> None:
    first, fd1 = new_driver_log(tmp_path)
    second, fd2 = new_driver_log(tmp_path)
    os.close(fd1)
    os.close(fd2)
    assert first != second
    assert {p.name for p in tmp_path.iterdir()} == {first.name, second.name}
    assert first.name.startswith("driver-") and first.suffix == ".log"
    assert _mode(first) == 0o600


def test_a_planted_symlink_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    monkeypatch.setattr(spark_mod.time, "strftime", lambda fmt: "20260101-000000")
    monkeypatch.setattr(spark_mod.secrets, "token_hex", lambda n: "guessed")
    name = f"driver-20260101-000000-{os.getpid()}-guessed.log"
    (log_dir / name).symlink_to(victim)
    with pytest.raises(StateDirError, match="cannot create the Spark driver log"):
        new_driver_log(log_dir)
    assert victim.read_text() == "precious"


def test_old_logs_are_pruned_to_the_newest(tmp_path: Path) -> None:
    outside = tmp_path / "outside.log"
    outside.write_text("not a driver log")
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    old = []
    for i in range(KEEP_DRIVER_LOGS + 3):
        path = log_dir / f"driver-old-{i:02d}.log"
        path.write_text(str(i))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
        old.append(path)
    (log_dir / "driver-link.log").symlink_to(outside)
    (log_dir / "notes.txt").write_text("mine")
    (log_dir / "driver-dir.log").mkdir()

    path, fd = new_driver_log(log_dir)
    os.close(fd)

    logs = sorted(
        p.name for p in log_dir.glob("driver-*.log") if p.is_file() and not p.is_symlink()
    )
    assert len(logs) == KEEP_DRIVER_LOGS
    assert path.name in logs  # the new one, and the newest of the old ones
    assert set(logs) - {path.name} == {p.name for p in old[-(KEEP_DRIVER_LOGS - 1) :]}
    # anything that is not a regular driver log is left alone
    assert (log_dir / "driver-link.log").is_symlink() and outside.read_text() == "not a driver log"
    assert (log_dir / "notes.txt").read_text() == "mine" and (log_dir / "driver-dir.log").is_dir()


def test_pruning_reports_what_it_deleted(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"driver-{i}.log").write_text("")
        os.utime(tmp_path / f"driver-{i}.log", (i, i))
    assert prune_driver_logs(tmp_path, keep=1) == [
        tmp_path / "driver-1.log",
        tmp_path / "driver-0.log",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["driver-2.log"]
