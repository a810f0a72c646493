"""Where logstore keeps its files outside the repository, and the checks before it writes there.

``cache_home`` and ``state_home`` are pure functions of the environment. ``state_subdir`` and
``private_dir`` create and check the directories the tool writes its own files into (the local
broker's data, Spark's driver logs): real directories of this user, mode 0700, so that no other user
can read them or plant a symlink that redirects a write.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from logstore_cli.errors import ConfigError, StateDirError

_STATE_SETTING = "LOGSTORE_STATE_DIR (or --state-dir)"
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def cache_home() -> Path:
    """Resolved jars and other downloaded artefacts (``LOGSTORE_HOME``, else ``~/.cache/logstore``)."""
    env = os.environ.get("LOGSTORE_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "logstore"


def state_home() -> Path:
    """Running services' state: the local broker's data, logs and pid (``LOGSTORE_STATE_DIR``)."""
    env = os.environ.get("LOGSTORE_STATE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "logstore"


def check_state_dir(state_dir: Path) -> None:
    """Raise ConfigError when ``state_dir`` is, or lies below, something that is not a directory.

    Commands that only read the state (``broker status``) call it too: a bad setting is reported as
    such instead of as a missing file.
    """
    blocker = _blocking_file(state_dir)
    if blocker is not None:
        where = "" if blocker == state_dir else f" lies below {blocker}, which"
        raise ConfigError(
            f"the state directory {state_dir}{where} is not a directory",
            hint=f"set {_STATE_SETTING} to a directory path, e.g. ~/.local/state/logstore",
        )


def state_subdir(state_dir: Path, *parts: str) -> Path:
    """``state_dir/parts…`` ready for the tool's own files.

    The state directory itself is the user's choice (it may be a symlink, any mode) and is created
    when missing; every directory below it is logstore's own and must pass ``private_dir``.
    """
    check_state_dir(state_dir)
    _make_dirs(state_dir)
    if not os.access(state_dir, os.W_OK | os.X_OK):
        raise _not_writable(state_dir)
    path = state_dir
    for part in parts:
        path = private_dir(path / part)
    return path


def private_dir(path: Path) -> Path:
    """``path`` as a directory only this user can use: created 0700 (with its parents) when missing.

    Refused when it is a symlink, not a directory, or another user's; a wider mode is narrowed to
    0700 (it is the tool's own directory, and may hold passwords and logs).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        _make_dirs(path)
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise StateDirError(
            f"{path} is {kind}; logstore writes its files only into real directories of its own",
            hint=f"remove {path} (logstore creates it again), or set {_STATE_SETTING} elsewhere",
        )
    if st.st_uid != os.getuid():
        raise StateDirError(
            f"{path} belongs to another user (uid {st.st_uid}); logstore will not write into it",
            hint=f"set {_STATE_SETTING} to a directory of your own",
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def _make_dirs(path: Path) -> None:
    """``mkdir -p`` with mode 0700 for what it creates; errors name the path and the fix."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        blocker = _blocking_file(path) or path
        raise StateDirError(
            f"cannot create the directory {path}: {blocker} is not a directory",
            hint=f"remove {blocker}, or set {_STATE_SETTING} elsewhere",
        ) from exc
    except OSError as exc:
        if exc.errno in _NOT_WRITABLE:
            raise _not_writable(Path(exc.filename or path)) from exc
        raise StateDirError(f"cannot create the directory {path}: {exc.strerror}") from exc


def _blocking_file(path: Path) -> Path | None:
    """The nearest of ``path`` and its parents that exists, when it is not a directory."""
    for candidate in (path, *path.parents):
        try:
            st = os.stat(candidate)  # a symlink to a directory is a directory here
        except FileNotFoundError:
            if candidate.is_symlink():
                return candidate  # dangling
            continue
        except NotADirectoryError:
            continue  # a parent is a file: found further up
        except OSError:
            return None  # unreadable: the write that follows reports it
        return None if stat.S_ISDIR(st.st_mode) else candidate
    return None


def _not_writable(path: Path) -> StateDirError:
    return StateDirError(
        f"the state directory {path} is not writable",
        hint=f"make it writable, or set {_STATE_SETTING} to a directory you can write",
    )
