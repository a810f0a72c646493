"""``Storage`` on a local (or mounted POSIX) directory: today's semantics.

- ``write``: a temporary file in the same directory, fsync, ``os.replace``, fsync of the directory:
  a reader never sees half an object, and the rename survives a crash.
- ``put_if_absent``: the temporary file is hard-linked to its name, which fails when the name
  exists (what Delta's local log stores do): atomic across processes and hosts sharing the disk.
- ``replace_if_version``: compare and replace under an ``flock`` of ``.<name>.lock`` beside the
  object (every writer here takes it), the compare reading the version from the file itself.
- the version token is ``<inode>-<mtime ns>-<size>`` of the file read: every write makes a new
  file (a new inode while the old one is held open by nobody but possibly reused later, so mtime and
  size are part of it).

Containment: keys are checked segments, and before any read, write, delete or listing the
target's directory is resolved (symlinks followed) and must lie inside the resolved root; an object
that is itself a symlink is never read.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

from logstore_cli.errors import WarehouseError
from logstore_cli.storage.base import Blob, Listing, Storage
from logstore_cli.storage.uri import key_segments, segment_problem

_TMP_PREFIX = ".logstore-tmp-"
_LOCK_SUFFIX = ".lock"


def _version(st: os.stat_result) -> str:
    return f"{st.st_ino}-{st.st_mtime_ns}-{st.st_size}"


def _io_error(what: str, path: Path, exc: OSError) -> WarehouseError:
    return WarehouseError(
        f"cannot {what} {path}: {exc.strerror or exc}",
        hint="check that the warehouse directory is writable by this user",
    )


class LocalStorage:
    """``Storage`` below the local directory ``root``."""

    def __init__(self, root: Path) -> None:
        self._root = Path(root)

    @property
    def root(self) -> Path:
        return self._root

    @property
    def uri(self) -> str:
        return str(self._root)

    def __repr__(self) -> str:
        return f"LocalStorage({str(self._root)!r})"

    def path(self, key: str) -> Path:
        """The local path of ``key`` (checked segments; not resolved)."""
        return self._root.joinpath(*key_segments(key))

    def child(self, key: str) -> Storage:
        return LocalStorage(self.path(key))

    def _inside(self, path: Path) -> Path:
        """``path`` if its parent resolves inside the resolved root (the root itself included)."""
        root = self._root.resolve()
        parent = path.parent.resolve()
        if parent != root and not parent.is_relative_to(root):
            raise WarehouseError(
                f"refusing to touch {path}: its directory resolves to {parent}, which is not "
                f"inside {root}",
                hint="logstore only writes below its warehouse; remove the symlink",
            )
        return path

    def _target(self, key: str, *, create_parent: bool) -> Path:
        path = self.path(key)
        if create_parent:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise _io_error("create", path.parent, exc) from None
        return self._inside(path)

    def read(self, key: str) -> Blob | None:
        path = self._inside(self.path(key))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise WarehouseError(f"refusing to read {path}: it is a symlink") from None
            raise _io_error("read", path, exc) from None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise WarehouseError(f"{path} is not a regular file", hint="remove it")
            return Blob(f.read(), _version(st))

    def _temporary(self, path: Path, data: bytes) -> Path:
        tmp = path.with_name(f"{_TMP_PREFIX}{path.name}.{uuid.uuid4().hex[:12]}")
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        return tmp

    @staticmethod
    def _sync_dir(directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _replace(self, path: Path, data: bytes) -> str:
        tmp = self._temporary(path, data)
        try:
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        self._sync_dir(path.parent)
        return _version(os.stat(path, follow_symlinks=False))

    def write(self, key: str, data: bytes) -> str:
        path = self._target(key, create_parent=True)
        try:
            with self._locked(path):
                return self._replace(path, data)
        except OSError as exc:
            raise _io_error("write", path, exc) from None

    def put_if_absent(self, key: str, data: bytes) -> str | None:
        path = self._target(key, create_parent=True)
        try:
            tmp = self._temporary(path, data)
            try:
                os.link(tmp, path, follow_symlinks=False)
            except FileExistsError:
                return None
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink()
            self._sync_dir(path.parent)
            return _version(os.stat(path, follow_symlinks=False))
        except OSError as exc:
            raise _io_error("write", path, exc) from None

    def replace_if_version(self, key: str, data: bytes, version: str) -> str | None:
        path = self._target(key, create_parent=False)
        try:
            with self._locked(path):
                try:
                    current = os.stat(path, follow_symlinks=False)
                except FileNotFoundError:
                    return None
                if not stat.S_ISREG(current.st_mode) or _version(current) != version:
                    return None
                return self._replace(path, data)
        except FileNotFoundError:  # the directory (and so the object) is gone
            return None
        except OSError as exc:
            raise _io_error("write", path, exc) from None

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        """The ``flock`` that makes a compare-and-replace one step (held until the fd closes)."""
        lock = path.with_name(f".{path.name}{_LOCK_SUFFIX}")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held for one stat and one rename: never long
            yield
        finally:
            os.close(fd)

    def delete(self, key: str) -> None:
        path = self._target(key, create_parent=False)
        try:
            # Under the lock, so a compare-and-replace never recreates what was just deleted; the
            # lock file stays (removing a lock file others may wait on would split the lock).
            with self._locked(path):
                path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _io_error("delete", path, exc) from None

    def exists(self, key: str) -> bool:
        return os.path.lexists(self._inside(self.path(key)))

    def list(self, key: str = "") -> Listing:
        directory = self._root
        if key:
            directory = self._inside(self.path(key))
            if directory.is_symlink():  # a link to a directory could list what lies outside
                self._inside(directory / "x")
        files: list[str] = []
        dirs: list[str] = []
        modified: dict[str, int] = {}
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if segment_problem(entry.name) or entry.name.startswith(_TMP_PREFIX):
                        continue
                    if entry.name.startswith(".") and entry.name.endswith(_LOCK_SUFFIX):
                        continue
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                        if not is_dir:
                            at = entry.stat(follow_symlinks=False).st_mtime_ns // 1_000_000
                    except OSError:
                        continue
                    if is_dir:
                        dirs.append(entry.name)
                    else:
                        files.append(entry.name)
                        modified[entry.name] = at
        except (FileNotFoundError, NotADirectoryError):
            return Listing((), ())
        except OSError as exc:
            raise _io_error("list", directory, exc) from None
        return Listing(tuple(sorted(files)), tuple(sorted(dirs)), modified)
