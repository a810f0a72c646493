"""``Storage`` on HDFS (``hdfs://namenode:port/path``), through ``hdfs-native`` (a Rust client: no
JVM, no libhdfs; imported only when a warehouse is on HDFS).

What HDFS gives: an exclusive create, and a rename that is one atomic NameNode operation and,
without overwrite, fails when the destination exists. What it lacks: a conditional replace (no
ETag, no compare-and-swap), and a whole-file visibility: a file being written is visible, half
written, under its name. So no object is ever created under its final name; every write goes to a
temporary file (``.logstore-tmp-…``, hidden from listings) that is renamed when it is complete.

- ``put_if_absent(key)``: temporary file, then ``rename(tmp, key, overwrite=False)``. Exactly one
  racer's rename succeeds. The object is a plain file, so Delta commits written this way
  (``_delta_log/N.json``) are what delta-rs and Spark read.
- ``replace_if_version(key, version)``: the object is kept as *generations*. Generation 0 is the
  plain file ``<key>``; generation N >= 1 is the file ``N`` in the hidden directory
  ``.<key>.logstore-gens`` beside it (its own directory, so finding an object's generations costs
  one look-up and one listing of a small directory, never of a whole ``_delta_log``); the object is
  its highest generation and its version token is ``g<N>.<its mtime in ms>`` (a rename keeps
  the time: a number reached again after the whole table was deleted and made anew is another
  version). A replace of version ``g<N>…`` renames a temporary file to generation N+1 with
  ``overwrite=False``: of two racers holding the same version, exactly one rename succeeds, the
  other is told the name exists (= the object changed). Older generations are removed after a replace (so renewals do not pile up files).
- Why that is enough: the highest generation only grows and is never removed (only generations
  below a higher one are), and a deletion is itself a generation (a *tombstone*: a directory
  renamed to N+1), so a version from before a delete can never match again (no ABA). A racer whose
  version was stale might find N+1 already removed (a gap left by the clean-up) and its rename
  succeed; so after every rename the generations are listed again, and a rename that is not the
  highest lost: its file is removed and the caller gets None. (That list can also show a *later*
  writer that replaced the new generation already; then the call reports that it lost, which is
  what the caller would learn at its next read anyway: its version is no longer current.)
- ``write``: the next generation, unconditionally (retried when a racer took the number).
- Listings show ``<key>`` for a plain file or a live highest generation, with the generation's
  modification time in ms; temporary files, generations directories and tombstones are hidden.

Containment: keys are checked segments (``uri.key_segments``) joined below the root path, never
normalized; HDFS has no symlinks unless an administrator enables them, and the path the NameNode
gets is absolute and built only from those segments.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from logstore_cli.errors import WarehouseError
from logstore_cli.storage.base import Blob, Listing, Storage
from logstore_cli.storage.uri import key_segments, segment_problem

if TYPE_CHECKING:
    from collections.abc import Callable

TMP_PREFIX = ".logstore-tmp-"
_GENERATIONS = re.compile(r"\.(?P<name>.+)\.logstore-gens")  # the directory beside the object
_WRITE_ATTEMPTS = 100  # an unconditional write retried while racers take the next number
# hdfs-native retries a NameNode it cannot reach for minutes by default (15 attempts, sleeps up to
# 15 s): a wrong port would hang a command that long. A few seconds ride out a brief hiccup.
CLIENT_CONFIG = {
    "dfs.client.failover.max.attempts": "3",
    "dfs.client.failover.sleep.max.millis": "1000",
}


def generations_dir(name: str) -> str:
    """The hidden directory beside the object ``name`` that holds its generations 1, 2, ..."""
    return f".{name}.logstore-gens"


def generation_name(name: str, n: int) -> str:
    """Generation ``n`` of the object ``name``, relative to its directory (0: the plain file)."""
    return name if n == 0 else f"{generations_dir(name)}/{n}"


@dataclass(frozen=True)
class _Generation:
    n: int
    file: str  # its name in the directory
    is_dir: bool  # a tombstone: the object was deleted
    modified_ms: int


def _version(generation: _Generation) -> str:
    """The version token: the generation's number and its file's modification time (a rename
    keeps it), so a number reached again after a whole table was deleted and made anew is another
    version."""
    return f"g{generation.n}.{generation.modified_ms}"


def _failure(what: str, where: str, exc: Exception) -> WarehouseError:
    return WarehouseError(
        f"cannot {what} {where}: {type(exc).__name__}: {exc}",
        hint="check that the NameNode is reachable (hdfs://host:port) and that this user may "
        "read and write below the warehouse path",
    )


def make_client(url: str) -> Any:
    """An ``hdfs_native.Client`` for ``hdfs://host:port`` (the package imported here, lazily)."""
    from hdfs_native import Client

    try:
        return Client(url, dict(CLIENT_CONFIG))
    except Exception as exc:
        raise _failure("connect to", url, exc) from None


class HdfsStorage:
    """``Storage`` below ``hdfs://host[:port]/path``. ``client`` is shared by children (thread-safe)."""

    def __init__(self, client: Any, host: str, segments: tuple[str, ...] = ()) -> None:
        for segment in segments:
            if segment_problem(segment):
                raise ValueError(f"bad path segment {segment!r}")  # callers pass checked ones
        self._client = client
        self._host = host
        self._segments = tuple(segments)

    @classmethod
    def open(cls, host: str, segments: tuple[str, ...]) -> HdfsStorage:
        return cls(make_client(f"hdfs://{host}"), host, segments)

    @property
    def host(self) -> str:
        return self._host

    @property
    def segments(self) -> tuple[str, ...]:
        """The root's path as checked segments (empty for the file system's root)."""
        return self._segments

    def at_root(self) -> HdfsStorage:
        """The same file system at ``/`` (on the same client)."""
        return HdfsStorage(self._client, self._host, ())

    @property
    def path(self) -> str:
        """The root's absolute path on the file system ('/' for the root)."""
        return "/" + "/".join(self._segments)

    @property
    def uri(self) -> str:
        return f"hdfs://{self._host}{self.path}".rstrip("/")

    @property
    def spark_uri(self) -> str:
        """The same location as Spark names it: Hadoop's own ``hdfs://`` (pyspark's Hadoop client
        has the connector; Delta's ``HDFSLogStore`` commits by an atomic rename there)."""
        return self.uri

    def __repr__(self) -> str:
        return f"HdfsStorage({self.uri!r})"

    def _full(self, key: str) -> str:
        """The absolute path of ``key``: built from checked segments, never normalized."""
        return "/" + "/".join((*self._segments, *key_segments(key)))

    def _split(self, key: str) -> tuple[str, str]:
        """``key``'s directory (absolute path) and its name."""
        full = self._full(key)
        directory, _, name = full.rpartition("/")
        return directory or "/", name

    def child(self, key: str) -> Storage:
        return HdfsStorage(self._client, self._host, (*self._segments, *key_segments(key)))

    def _where(self, path: str) -> str:
        return f"hdfs://{self._host}{path}"

    # -- generations -------------------------------------------------------------------------

    def _statuses(self, directory: str) -> list[Any]:
        try:
            return list(self._client.list_status(directory))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except Exception as exc:
            raise _failure("list", self._where(directory), exc) from None

    def _generations(self, directory: str, name: str) -> list[_Generation]:
        """Every generation of ``name`` in ``directory``, lowest first: the plain file (one
        look-up) and the generations directory's entries (a listing of that small directory
        only, so reading a Delta commit never lists the whole ``_delta_log``)."""
        found = []
        try:
            plain = self._client.get_file_info(f"{directory}/{name}")
        except FileNotFoundError:
            plain = None
        except Exception as exc:
            raise _failure("read", self._where(f"{directory}/{name}"), exc) from None
        if plain is not None and not plain.isdir:  # a directory there is no object
            found.append(_Generation(0, name, False, int(plain.modification_time)))
        gens = generations_dir(name)
        for status in self._statuses(f"{directory}/{gens}"):
            file = status.path.rpartition("/")[2]
            if file.isdigit():
                found.append(
                    _Generation(int(file), f"{gens}/{file}", bool(status.isdir),
                                int(status.modification_time))
                )  # fmt: skip
        return sorted(found, key=lambda g: g.n)

    def _current(self, directory: str, name: str) -> _Generation | None:
        """The object's highest generation (a tombstone included); None when it never existed."""
        generations = self._generations(directory, name)
        return generations[-1] if generations else None

    def _remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._client.delete(path, True)

    def _remove_below(self, directory: str, name: str, n: int) -> None:
        """Remove the generations of ``name`` below ``n`` (never the highest: ``n`` is above).
        Best effort: the write it follows has succeeded, and a generation left behind is removed
        by the next one (or hidden by it)."""
        with contextlib.suppress(Exception):
            for generation in self._generations(directory, name):
                if generation.n < n:
                    self._remove(f"{directory}/{generation.file}")

    def _temporary(self, directory: str, name: str, data: bytes) -> str:
        """A complete temporary file beside the object (its directory created as needed)."""
        from hdfs_native import WriteOptions

        tmp = f"{directory}/{TMP_PREFIX}{name}.{uuid.uuid4().hex[:12]}"
        try:
            with self._client.create(tmp, WriteOptions(create_parent=True)) as f:
                f.write(data)
        except Exception as exc:
            with contextlib.suppress(Exception):
                self._remove(tmp)
            raise _failure("write", self._where(tmp), exc) from None
        return tmp

    def _install(
        self, directory: str, name: str, n: int, make: Callable[[], str]
    ) -> _Generation | None:
        """Rename what ``make`` builds (a temporary file or directory) to generation ``n``: that
        generation when it is now the highest, None when ``n`` was taken (or a higher one exists:
        this rename lost) or the directory is gone."""
        target = f"{directory}/{generation_name(name, n)}"
        source = make()
        try:
            if n:  # idempotent; never removed but with the whole table
                self._client.mkdirs(f"{directory}/{generations_dir(name)}", 0o755, True)
            self._client.rename(source, target, False)
        except (FileExistsError, FileNotFoundError):
            self._remove(source)
            return None
        except Exception as exc:
            with contextlib.suppress(Exception):
                self._remove(source)
            raise _failure("write", self._where(target), exc) from None
        current = self._current(directory, name)
        if current is None or current.n != n:  # a stale version found a removed generation
            self._remove(target)
            return None
        return current

    # -- the Storage protocol ----------------------------------------------------------------

    def read(self, key: str) -> Blob | None:
        directory, name = self._split(key)
        for _ in range(_WRITE_ATTEMPTS):
            current = self._current(directory, name)
            if current is None or current.is_dir:
                return None
            path = f"{directory}/{current.file}"
            try:
                with self._client.read(path) as f:
                    data = f.read()
            except FileNotFoundError:  # replaced (and cleaned up) between the list and the read
                continue
            except Exception as exc:
                raise _failure("read", self._where(path), exc) from None
            return Blob(data, _version(current))
        raise WarehouseError(
            f"cannot read {self._where(directory + '/' + name)}: it keeps changing"
        )

    def write(self, key: str, data: bytes) -> str:
        directory, name = self._split(key)
        for _ in range(_WRITE_ATTEMPTS):
            current = self._current(directory, name)
            n = 1 if current is None else current.n + 1
            installed = self._install(
                directory, name, n, lambda: self._temporary(directory, name, data)
            )
            if installed is not None:
                self._remove_below(directory, name, n)
                return _version(installed)
        raise WarehouseError(
            f"cannot write {self._where(directory + '/' + name)}: other writers kept replacing it",
            hint="another process is writing the same object in a loop; stop it and try again",
        )

    def put_if_absent(self, key: str, data: bytes) -> str | None:
        directory, name = self._split(key)
        current = self._current(directory, name)
        if current is not None and not current.is_dir:
            return None
        # The first object is the plain file; after a deletion, the generation after its tombstone.
        n = 0 if current is None else current.n + 1
        installed = self._install(
            directory, name, n, lambda: self._temporary(directory, name, data)
        )
        if installed is None:
            return None
        if n:
            self._remove_below(directory, name, n)
        return _version(installed)

    def replace_if_version(self, key: str, data: bytes, version: str) -> str | None:
        directory, name = self._split(key)
        current = self._current(directory, name)
        if current is None or current.is_dir or _version(current) != version:
            return None  # changed or gone (checked again, atomically, by the rename)
        n = current.n + 1
        installed = self._install(
            directory, name, n, lambda: self._temporary(directory, name, data)
        )
        if installed is None:
            return None
        self._remove_below(directory, name, n)
        return _version(installed)

    def delete(self, key: str) -> None:
        directory, name = self._split(key)
        for _ in range(_WRITE_ATTEMPTS):
            current = self._current(directory, name)
            if current is None or current.is_dir:
                return
            if self._install(directory, name, current.n + 1, self._tombstone(directory)):
                self._remove_below(directory, name, current.n + 1)
                return
        raise WarehouseError(
            f"cannot delete {self._where(directory + '/' + name)}: other writers kept replacing it"
        )

    def _tombstone(self, directory: str) -> Callable[[], str]:
        def make() -> str:
            tmp = f"{directory}/{TMP_PREFIX}deleted.{uuid.uuid4().hex[:12]}"
            try:
                self._client.mkdirs(tmp, 0o755, True)
            except Exception as exc:
                raise _failure("write", self._where(tmp), exc) from None
            return tmp

        return make

    def delete_all(self) -> int:
        """Delete everything below this root, the root included: how many files there were.
        Refused at the file system's root (a warehouse's table is always some levels down)."""
        if not self._segments:
            raise WarehouseError(
                f"refusing to delete everything on {self.uri}",
                hint="logstore deletes only below a table's own path",
            )
        try:
            count = sum(1 for s in self._client.list_status(self.path, True) if not s.isdir)
            self._client.delete(self.path, True)
        except FileNotFoundError:
            return 0
        except Exception as exc:
            raise _failure("delete", self.uri, exc) from None
        return count

    def exists(self, key: str) -> bool:
        directory, name = self._split(key)
        current = self._current(directory, name)
        return current is not None and not current.is_dir

    def list(self, key: str = "") -> Listing:
        directory = self._full(key) if key else self.path
        plain: dict[str, int] = {}  # a plain file's name: its modification time
        replaced: set[str] = set()  # names with a generations directory
        dirs: list[str] = []
        for status in self._statuses(directory):
            file = status.path.rpartition("/")[2]
            if file.startswith(TMP_PREFIX):
                continue
            generations = _GENERATIONS.fullmatch(file)
            if generations is not None and status.isdir:
                replaced.add(generations.group("name"))
            elif status.isdir:
                if not segment_problem(file):
                    dirs.append(file)
            elif not segment_problem(file):
                plain[file] = int(status.modification_time)
        modified = {name: at for name, at in plain.items() if name not in replaced}
        # Only an object ever replaced or deleted needs its generations read (a Delta log's
        # commits are plain files: one listing, whatever its length).
        for name in replaced:
            if segment_problem(name) or name in dirs:
                continue
            current = self._current(directory, name)
            if current is not None and not current.is_dir:
                modified[name] = current.modified_ms
        return Listing(tuple(sorted(modified)), tuple(sorted(dirs)), modified)
