"""The state directory: created private, checked before the tool writes into it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from logstore_cli.errors import ConfigError, StateDirError
from logstore_cli.paths import check_state_dir, private_dir, state_home, state_subdir


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_state_home_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGSTORE_STATE_DIR", "~/here")
    assert state_home() == Path.home() / "here"
    monkeypatch.delenv("LOGSTORE_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", "/xdg/state")
    assert state_home() == Path("/xdg/state/logstore")
    monkeypatch.delenv("XDG_STATE_HOME")
    assert state_home() == Path.home() / ".local/state/logstore"


def test_subdirs_are_created_private(tmp_path: Path) -> None:
    state_dir = tmp_path / "new" / "state"
    logs = state_subdir(state_dir, "spark", "logs")
    assert logs == state_dir / "spark" / "logs" and logs.is_dir()
    assert _mode(state_dir / "spark") == 0o700 and _mode(logs) == 0o700


def test_a_wider_mode_is_narrowed(tmp_path: Path) -> None:
    (tmp_path / "broker").mkdir(mode=0o755)
    (tmp_path / "broker").chmod(0o777)
    state_subdir(tmp_path, "broker")
    assert _mode(tmp_path / "broker") == 0o700


def test_the_state_dir_itself_may_be_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    (tmp_path / "link").symlink_to(real)
    assert state_subdir(tmp_path / "link", "broker").is_dir()
    assert (real / "broker").is_dir()
    assert _mode(real) == 0o755  # the user's own directory is left as it is


def test_a_symlink_below_the_state_dir_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "spark").symlink_to(target)
    with pytest.raises(StateDirError, match="symbolic link") as info:
        state_subdir(tmp_path / "state", "spark", "logs")
    assert info.value.exit_code == 1
    assert list(target.iterdir()) == []


def test_a_file_where_a_subdir_belongs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "broker").write_text("x")
    with pytest.raises(StateDirError, match="not a directory") as info:
        state_subdir(tmp_path, "broker")
    assert info.value.hint and str(tmp_path / "broker") in info.value.hint


def test_another_users_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "spark").mkdir()
    owner = os.lstat(tmp_path / "spark").st_uid
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)  # as seen by another user
    with pytest.raises(StateDirError, match=f"another user \\(uid {owner}\\)"):
        private_dir(tmp_path / "spark")


@pytest.mark.parametrize("below", [(), ("below",), ("below", "deeper")])
def test_a_state_dir_at_or_below_a_file_is_an_input_error(
    tmp_path: Path, below: tuple[str, ...]
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep")
    state_dir = afile.joinpath(*below)
    with pytest.raises(ConfigError) as info:
        state_subdir(state_dir, "broker")
    err = info.value
    assert err.exit_code == 2
    assert err.message.startswith(f"the state directory {state_dir} ")
    assert err.message.endswith("is not a directory") and str(afile) in err.message
    assert err.hint and "LOGSTORE_STATE_DIR" in err.hint
    assert afile.read_text() == "keep"


def test_a_dangling_symlink_as_state_dir_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "gone").symlink_to(tmp_path / "missing")
    with pytest.raises(ConfigError, match="not a directory"):
        check_state_dir(tmp_path / "gone")


def test_an_unwritable_state_dir_is_a_clear_error() -> None:
    # /sys refuses new directories to every user, root included.
    state_dir = Path("/sys/logstore-test-state")
    with pytest.raises(StateDirError, match="is not writable") as info:
        state_subdir(state_dir, "broker")
    assert str(state_dir) in info.value.message
    assert info.value.hint and "LOGSTORE_STATE_DIR" in info.value.hint
