"""The writer lease of a table: one ingest job writes a table at a time (design §6.7).

Offsets in Delta commits and the ordering of epochs assume a single live writer, so a job takes the
table's lease before it writes, renews it while it runs, checks it right before every Delta commit
and releases it when it stops. A second job is refused with the holder named; a lease that was not
renewed in time expires, so a killed job cannot lock a table forever; and a holder on this host
whose process has exited is taken over at once, so a killed job restarted on the same machine does
not wait for the expiry.

Files, in the table's ``_logstore`` directory (``ingest.plan.STATE_DIR``, out of Delta's way):

- ``lease.json``: the holder (job, host, pid, the process's identity, a random token, the job's
  writer id once it is known) and the lease's times, its fencing token and the writers it still has
  to fence, replaced atomically (a temporary file, fsync, ``os.replace``, fsync of the directory),
  so a reader never sees half a lease; a release marks it ``"released"`` instead of removing it, so
  that the next holder's fencing token counts on from it;
- ``lease.lock``: an empty file whose ``flock`` makes each read-check-write of ``lease.json`` (take,
  renew, release) one step, across threads and processes.

**Fencing.** Every acquisition writes ``fence`` = the stored record's ``fence`` + 1 (read under the
lock, or by the conditional write: exact; a record without the field counts as 0), so the token only
grows. A taker whose previous record was not released (it expired, or its holder died) inherits that
record's writer in ``unfenced``: before its first epoch commit the job fences each of them in Delta
(docs/consistency.md §6, "The fence"), then rewrites its record with ``unfenced`` empty
(``HeldLease.set_writer``). A holder that dies before that passes them on to the next taker.

Neither file, nor ``_logstore`` itself, is followed when it is a symlink: the table directory was
checked to lie inside the warehouse, and a link in it must not move the lease elsewhere.

**What storage this needs.** A POSIX file system whose ``flock`` excludes every process that may
run a job against the table: a local disk, or a network file system with working locks across
hosts (NFSv4 with locking; not every FUSE or SMB mount). Expiry compares wall-clock times
(``time.time``) written by different hosts, so their clocks must agree to well within the TTL. On
object storage (S3) there is no ``flock``: there the read-check-write is one conditional put
(``catalog.storage_lease.StorageLease``, on the storage seam of issue 19), which shares this
module's ``LeaseInfo``, errors and keep-alive (``HeldLease``).

**Telling a dead holder from a live one.** On Linux the lease records the holder's process
identity: the boot id, the pid namespace and the process's start time from ``/proc/<pid>/stat``. A
holder on this host (same host name) is dead when no process has its pid, when the process with
that pid started at another time (the pid was reused) or is a zombie. A lease written under another
boot or pid namespace is never judged by pid: it may be another machine or container with the same
host name, so it is waited out. Without ``/proc`` only "no process has that pid" counts as dead.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from logstore_cli.errors import InvalidInputError, LogstoreError, WarehouseError
from logstore_cli.ingest.plan import STATE_DIR

LEASE_FILE = "lease.json"
LOCK_FILE = "lease.lock"
LEASE_FORMAT = 1
RELEASED = "released"  # the key that marks a lease given back (LeaseInfo ignores it)
_TMP_PREFIX = f".{LEASE_FILE}."
_TMP_SUFFIX = ".tmp"
_MAX_LEASE_BYTES = 64 * 1024  # a lease is a few hundred bytes; anything larger is not one
LOCK_WAIT_S = 10.0  # the lock is held for one small read and write: waiting longer means a hang
# Bounds of a lease's fields: a file anyone could edit must not reach datetime (OverflowError past
# year 9999) or os.kill (OverflowError past a C int) with a value no job could have written.
MAX_TIME = 253_402_300_799.0  # 9999-12-31T23:59:59Z
MAX_PID = 2**22  # Linux's pid_max limit

_log = logging.getLogger(__name__)

Clock = Callable[[], float]


def local_time(ts: float) -> str:
    """``ts`` (seconds since the epoch) as local ISO time with its UTC offset; a value the platform
    cannot show as a date (``LeaseInfo`` refuses those, this is the last line) as the number."""
    try:
        return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")
    except (OverflowError, ValueError, OSError):
        return f"{ts!r} s after 1970 (not a valid time)"


@dataclass(frozen=True)
class LeaseInfo:
    """What ``lease.json`` holds: who holds the table's lease, and until when."""

    job: str
    host: str
    pid: int
    token: str  # random per acquisition: tells this holder from any later one
    acquired_at: float  # seconds since the epoch
    expires_at: float
    process: str | None = None  # "<boot id>/<pid namespace>:<start ticks>"; None without /proc
    fence: int = 0  # the fencing token: the previous record's + 1 (a record without it: 0)
    writer: str | None = None  # the holder's writer id, once its job has read it
    unfenced: tuple[str, ...] = ()  # writers of taken-over leases this holder has yet to fence

    def expired(self, now: float) -> bool:
        return self.expires_at <= now

    @property
    def holder(self) -> str:
        return f"job '{self.job}' (host {self.host}, pid {self.pid})"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": LEASE_FORMAT,
            "job": self.job,
            "host": self.host,
            "pid": self.pid,
            "process": self.process,
            "token": self.token,
            "acquired_at": self.acquired_at,
            "expires_at": self.expires_at,
            "fence": self.fence,
            "writer": self.writer,
            "unfenced": list(self.unfenced),
        }

    @classmethod
    def from_json(cls, data: Any) -> LeaseInfo:
        """The lease in ``data``; ValueError saying what is wrong when it is not one."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if data.get("format") != LEASE_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {LEASE_FORMAT}")
        for name in ("job", "host", "token"):
            if not isinstance(data.get(name), str) or not data[name]:
                raise ValueError(f"{name!r} is not a non-empty string")
        pid = data.get("pid")
        if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= MAX_PID:
            raise ValueError(f"'pid' is not a process id (an integer from 1 to {MAX_PID})")
        times = {}
        for name in ("acquired_at", "expires_at"):
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name!r} is not a number")
            if not 0 <= value <= MAX_TIME:  # NaN compares false; a huge int compares exactly
                raise ValueError(f"{name!r} is not a time (seconds since 1970, up to year 9999)")
            times[name] = float(value)
        if times["expires_at"] < times["acquired_at"]:
            raise ValueError("'expires_at' is before 'acquired_at'")
        process = data.get("process")
        if process is not None and not isinstance(process, str):
            raise ValueError("'process' is not a string")
        # Records of older versions have no fencing fields: token 0, no writer.
        fence = data.get("fence", 0)
        if isinstance(fence, bool) or not isinstance(fence, int) or not 0 <= fence < 2**63:
            raise ValueError("'fence' is not an integer from 0 to 2^63 - 1")
        writer = data.get("writer")
        if writer is not None and (not isinstance(writer, str) or not writer):
            raise ValueError("'writer' is not a non-empty string")
        unfenced = data.get("unfenced", [])
        if not isinstance(unfenced, list) or not all(isinstance(w, str) and w for w in unfenced):
            raise ValueError("'unfenced' is not a list of writer ids")
        return cls(
            job=data["job"],
            host=data["host"],
            pid=pid,
            token=data["token"],
            acquired_at=times["acquired_at"],
            expires_at=times["expires_at"],
            process=process,
            fence=fence,
            writer=writer,
            unfenced=tuple(unfenced),
        )


def successor_fencing(previous: LeaseInfo | None, released: bool) -> tuple[int, tuple[str, ...]]:
    """The fencing token and the writers to fence of a lease taken where ``previous`` was stored
    (None: nothing ever was). A released record's writer stopped by itself: it needs no fence;
    what its holder had not fenced yet is passed on either way."""
    if previous is None:
        return 1, ()
    owed = list(previous.unfenced)
    if not released and previous.writer is not None:
        owed.append(previous.writer)
    return previous.fence + 1, tuple(dict.fromkeys(owed))


class LeaseHeldError(LogstoreError):
    """Another job holds the table's lease and it has not expired."""

    def __init__(self, table: str, holder: LeaseInfo, now: float) -> None:
        self.holder = holder
        remaining = max(0, math.ceil(holder.expires_at - now))
        super().__init__(
            f"table {table} is being written by {holder.holder}; its lease expires at "
            f"{local_time(holder.expires_at)} (in {remaining} s)",
            hint=f"wait for that job to finish, or stop it (on {holder.host}: kill "
            f"{holder.pid}); a stopped job's lease is taken over at once on the same host, "
            "elsewhere once it expires",
        )


class LeaseLostError(LogstoreError):
    """The lease is no longer ours: it expired, another holder took it, or it was removed."""


def _held_elsewhere(table: str, ours: LeaseInfo, current: LeaseInfo | None) -> LeaseLostError:
    if current is None:
        what = f"the lease of table {table} is gone (its file was removed)"
    else:
        what = (
            f"{current.holder} took over the lease of table {table} at "
            f"{local_time(current.acquired_at)}"
        )
    return LeaseLostError(
        f"{what}; ours ({ours.holder}) ran until {local_time(ours.expires_at)}",
        hint="this job stops without committing; make sure only one ingest runs per table, "
        "and that the lease TTL outlasts the longest pause of the job (renewals must land in time)",
    )


# -- process identity ----------------------------------------------------------------------------


def _machine_identity() -> str | None:
    """This boot and pid namespace: a pid means the same process only within both."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}/{namespace}" if boot else None


def _start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks after boot); None when none runs (or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces and ')'.
    fields = text.rpartition(")")[2].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def process_identity(pid: int) -> str | None:
    """``pid``'s identity as recorded in a lease; None where /proc cannot tell it."""
    machine, start = _machine_identity(), _start_ticks(pid)
    return None if machine is None or start is None else f"{machine}:{start}"


def local_holder_dead(info: LeaseInfo) -> bool:
    """Whether the holder's process, on this host, has certainly exited (see the module doc)."""
    if info.pid <= 0:
        return False
    mine = _machine_identity()
    if info.process is not None and mine is not None:
        machine, _, start = info.process.rpartition(":")
        if machine != mine:
            return False  # another boot or pid namespace: its pid says nothing here
        return _start_ticks(info.pid) != start
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: alive
        return False
    return False


# -- files -----------------------------------------------------------------------------------------


def _symlink_error(path: Path) -> WarehouseError:
    return WarehouseError(
        f"refusing to use {path}: it is a symlink",
        hint="logstore keeps a table's lease in the table's own directory; replace the link "
        "with a real directory or file",
    )


def _io_error(what: str, path: Path, exc: OSError) -> WarehouseError:
    return WarehouseError(
        f"cannot {what} {path}: {exc.strerror or exc}",
        hint="check that the table directory is writable by this user",
    )


@contextlib.contextmanager
def _state_dir(table_dir: Path, *, create: bool) -> Iterator[int | None]:
    """An fd of ``<table>/_logstore`` (created when ``create``), never through a symlink; None when
    it does not exist and ``create`` is off."""
    state = table_dir / STATE_DIR
    try:
        table_fd = os.open(table_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if not create:
            yield None
            return
        raise WarehouseError(f"the table directory {table_dir} does not exist") from None
    except OSError as exc:
        raise _io_error("open", table_dir, exc) from None
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(STATE_DIR, 0o755, dir_fd=table_fd)
        try:
            fd = os.open(
                STATE_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                dir_fd=table_fd,
            )  # fmt: skip
        except FileNotFoundError:
            if create:
                raise
            fd = None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                if os.path.islink(state):
                    raise _symlink_error(state) from None
                raise WarehouseError(f"{state} is not a directory") from None
            raise
    except OSError as exc:
        raise _io_error("open", state, exc) from None
    finally:
        os.close(table_fd)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def _locked(dir_fd: int, state: Path) -> Iterator[None]:
    """Hold ``lease.lock``'s flock (released when the fd closes, also if the process dies)."""
    path = state / LOCK_FILE
    try:
        fd = os.open(
            LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
            0o644, dir_fd=dir_fd,
        )  # fmt: skip
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink_error(path) from None
        raise _io_error("open", path, exc) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WarehouseError(f"{path} is not a regular file", hint="remove it")
        deadline = time.monotonic() + LOCK_WAIT_S
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LogstoreError(
                        f"{path} stayed locked for {LOCK_WAIT_S:g} s",
                        hint="another logstore process on this table holds the lock and seems "
                        "hung; find it (e.g. with 'fuser') and stop it",
                    ) from None
                time.sleep(delay)  # back off: the holder is inside a few small file operations
                delay = min(delay * 2, 0.05)
            except OSError as exc:
                raise _io_error("lock", path, exc) from None
        yield
    finally:
        os.close(fd)


def _read(dir_fd: int, state: Path) -> LeaseInfo | None:
    """The stored lease; None when there is none or it was released."""
    found = _read_record(dir_fd, state)
    return None if found is None or found[1] else found[0]


def _read_record(dir_fd: int, state: Path) -> tuple[LeaseInfo, bool] | None:
    """The stored lease record and whether it was released; None when there is none."""
    path = state / LEASE_FILE
    try:
        fd = os.open(
            LEASE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd
        )
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink_error(path) from None
        raise _io_error("read", path, exc) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise WarehouseError(f"{path} is not a regular file", hint="remove it")
        data = f.read(_MAX_LEASE_BYTES + 1)
    try:
        if len(data) > _MAX_LEASE_BYTES:
            raise ValueError(f"larger than {_MAX_LEASE_BYTES} bytes")
        parsed = json.loads(data.decode("utf-8"))
        info = LeaseInfo.from_json(parsed)
        released = parsed.get(RELEASED, False)
        if not isinstance(released, bool):
            raise ValueError(f"{RELEASED!r} is not true or false")
        return info, released
    except (ValueError, UnicodeDecodeError) as exc:
        raise WarehouseError(
            f"{path} is not a logstore lease: {exc}",
            hint="logstore writes this file atomically, so something else changed it; if no "
            "ingest job runs on this table, delete the file",
        ) from None


def encode_lease(info: LeaseInfo, *, released: bool = False) -> bytes:
    """A lease record's bytes (``released``: given back, kept for its fencing token)."""
    data: dict[str, Any] = info.to_json()
    if released:
        data[RELEASED] = True
    return json.dumps(data, separators=(",", ":")).encode() + b"\n"


def _write(dir_fd: int, state: Path, info: LeaseInfo, *, released: bool = False) -> None:
    tmp = f"{_TMP_PREFIX}{info.token}.{uuid.uuid4().hex[:8]}{_TMP_SUFFIX}"
    data = encode_lease(info, released=released)
    try:
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
            dir_fd=dir_fd,
        )  # fmt: skip
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, LEASE_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        os.fsync(dir_fd)  # the rename itself must survive a crash
    except OSError as exc:
        raise _io_error("write", state / LEASE_FILE, exc) from None


def _remove_stale_temporaries(dir_fd: int) -> None:
    """Temporary files of a writer killed mid-write (all writes happen under the lock we hold)."""
    with contextlib.suppress(OSError), os.scandir(dir_fd) as entries:
        for entry in entries:
            if entry.name.startswith(_TMP_PREFIX) and entry.name.endswith(_TMP_SUFFIX):
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=dir_fd)


def read_lease(table_dir: Path) -> LeaseInfo | None:
    """The table's lease as stored (live or expired); None when there is none or it was released."""
    with _state_dir(table_dir, create=False) as fd:
        return None if fd is None else _read(fd, table_dir / STATE_DIR)


def _takeable(current: LeaseInfo, host: str, holder_dead: Callable[[LeaseInfo], bool]) -> bool:
    """A live lease may be taken only from a holder on this host whose process has exited."""
    return current.host == host and holder_dead(current)


# -- the lease ---------------------------------------------------------------------------------


def check_lease_args(ttl_s: float, job: str) -> None:
    """InvalidInputError for a TTL that is no positive finite number, or an empty job name."""
    if isinstance(ttl_s, bool) or not (isinstance(ttl_s, int | float) and 0 < ttl_s < math.inf):
        raise InvalidInputError(
            f"the lease TTL must be a positive number of seconds, not {ttl_s!r}"
        )
    if not job:
        raise InvalidInputError("the job name of a lease is empty")


class HeldLease:
    """What every held lease shares, whatever it is stored on: its holder's info, the check of a
    stored lease against it, the keep-alive thread, and use as a context manager. Subclasses read
    and write the stored lease (``renew``, ``check``, ``release``)."""

    def __init__(
        self, table: str, info: LeaseInfo, ttl_s: float, clock: Clock, took_over: LeaseInfo | None
    ) -> None:
        self.table = table
        self._info = info
        self.ttl_s = ttl_s
        self._clock = clock
        self.took_over = took_over  # the expired or dead holder this lease replaced, if any
        self._mutex = threading.Lock()  # renewals (thread) against release
        self._released = False
        self._lost: LogstoreError | None = None  # what made a renewal fail for good
        self._renew_problem: LogstoreError | None = None  # the last failed renewal (may recover)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def info(self) -> LeaseInfo:
        return self._info

    @property
    def renewing(self) -> bool:
        """Whether the ``keep_alive`` thread runs (it ends on release, or when the lease is lost)."""
        return self._thread is not None and self._thread.is_alive()

    def renew(self) -> None:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def check(self, min_remaining_s: float = 0.0) -> None:
        """LeaseLostError unless the stored lease is still ours with ``min_remaining_s`` left."""
        raise NotImplementedError

    def set_writer(self, writer: str, unfenced: tuple[str, ...] = ()) -> None:
        """Record the job's writer id, and the writers it still has to fence (none once it fenced
        them), in the stored lease: a renewal that carries them. LeaseLostError when the lease is
        no longer ours."""
        with self._mutex:
            self._info = replace(self._info, writer=writer, unfenced=tuple(unfenced))
        self.renew()

    def set_unfenced(self, unfenced: tuple[str, ...]) -> None:
        """Record the writers this holder still has to fence (none once it fenced them), for a
        holder with no writer id of its own (``optimize``): a renewal that carries them."""
        with self._mutex:
            self._info = replace(self._info, unfenced=tuple(unfenced))
        self.renew()

    def _raise_if_done(self) -> None:
        """LeaseLostError when a renewal found the lease lost, or it was released."""
        if self._lost is not None:
            raise self._lost
        if self._released:
            raise LeaseLostError(f"the lease of table {self.table} was released")

    def _check_stored(self, current: LeaseInfo | None, min_remaining_s: float) -> None:
        """``check``'s verdict on the lease as stored now (``current``, None when there is none)."""
        if current is None or current.token != self._info.token:
            raise _held_elsewhere(self.table, self._info, current)
        self._info = current  # renewals of the keep-alive thread
        now = self._clock()
        if current.expires_at - now <= min_remaining_s:
            late = "expired" if current.expired(now) else "is about to expire"
            problem = self._renew_problem
            raise LeaseLostError(
                f"the lease of table {self.table} {late} (at {local_time(current.expires_at)}) "
                "without being renewed" + (f": {problem.message}" if problem else ""),
                hint="another job may take it at any moment, so this job stops without "
                "committing; renew more often than the TTL, or raise the TTL",
            )

    def _stop_renewing(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def keep_alive(self, interval_s: float) -> None:
        """Renew every ``interval_s`` seconds in a daemon thread until ``release``.

        A lease found lost ends the renewals and is raised by the next ``check``; any other failure
        (an I/O error) is retried at the next interval, and ``check`` reports it once the lease
        runs out without a renewal.
        """
        if not 0 < interval_s < self.ttl_s:
            raise InvalidInputError(
                f"the lease renewal interval must be above 0 and below the TTL ({self.ttl_s:g} s), "
                f"not {interval_s!r}"
            )
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._renew_every, args=(interval_s,), name="logstore-lease", daemon=True
        )
        self._thread.start()

    def _renew_every(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                self.renew()
                self._renew_problem = None
            except LeaseLostError as exc:
                if not self._stop.is_set():
                    self._lost = exc
                return
            except LogstoreError as exc:
                self._renew_problem = exc
            except Exception as exc:  # a renewal thread must never die silently
                self._renew_problem = LogstoreError(f"renewing the lease failed: {exc!r}")

    def __enter__(self) -> HeldLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Lease(HeldLease):
    """A held lease on a local (POSIX) table directory, made one step by ``flock``. Take it with
    ``acquire``; ``release`` it (or use it as a context manager)."""

    def __init__(
        self,
        table_dir: Path,
        table: str,
        info: LeaseInfo,
        ttl_s: float,
        clock: Clock,
        took_over: LeaseInfo | None,
    ) -> None:
        super().__init__(table, info, ttl_s, clock, took_over)
        self.table_dir = table_dir

    @classmethod
    def acquire(
        cls,
        table_dir: Path,
        job: str,
        ttl_s: float,
        *,
        clock: Clock = time.time,
        host: str | None = None,
        pid: int | None = None,
        table: str | None = None,
        holder_dead: Callable[[LeaseInfo], bool] = local_holder_dead,
    ) -> Lease:
        """Take the lease of the table at ``table_dir`` for ``ttl_s`` seconds, or raise
        LeaseHeldError naming the live holder. ``table`` names the table in messages (default: its
        directory); ``holder_dead`` judges a holder on this host (tests pass a fake)."""
        check_lease_args(ttl_s, job)
        host = socket.gethostname() if host is None else host
        pid = os.getpid() if pid is None else pid
        name = table or str(table_dir)
        state = table_dir / STATE_DIR
        with _state_dir(table_dir, create=True) as fd:
            assert fd is not None  # created
            with _locked(fd, state):
                now = clock()
                record = _read_record(fd, state)
                released = record is not None and record[1]
                stored = None if record is None else record[0]
                current = None if released else stored
                live = current is not None and not current.expired(now)
                if current is not None and live and not _takeable(current, host, holder_dead):
                    raise LeaseHeldError(name, current, now)
                _remove_stale_temporaries(fd)
                fence, unfenced = successor_fencing(stored, released)
                info = LeaseInfo(
                    job=job, host=host, pid=pid, token=uuid.uuid4().hex, acquired_at=now,
                    expires_at=now + ttl_s, process=process_identity(pid), fence=fence,
                    unfenced=unfenced,
                )  # fmt: skip
                _write(fd, state, info)
        if current is not None:
            why = "expired" if current.expired(now) else "its process has exited"
            _log.info("took over the lease of table %s from %s (%s)", name, current.holder, why)
        return cls(table_dir, name, info, float(ttl_s), clock, current)

    def renew(self) -> None:
        """Extend the lease by its TTL from now; LeaseLostError when it is no longer ours.

        A lease past its expiry that still holds our token is renewed: nobody took it (the check
        and the write are one step under the lock), so no other job has written meanwhile.
        """
        with self._mutex:
            if self._released:
                raise LeaseLostError(f"the lease of table {self.table} was released")
            state = self.table_dir / STATE_DIR
            with _state_dir(self.table_dir, create=False) as fd:
                if fd is None:
                    raise _held_elsewhere(self.table, self._info, None)
                with _locked(fd, state):
                    current = _read(fd, state)
                    if current is None or current.token != self._info.token:
                        raise _held_elsewhere(self.table, self._info, current)
                    info = replace(self._info, expires_at=self._clock() + self.ttl_s)
                    _write(fd, state, info)
            self._info = info

    def check(self, min_remaining_s: float = 0.0) -> None:
        """Raise LeaseLostError unless the lease is ours and has more than ``min_remaining_s`` left.

        The job calls it right before each Delta commit; the stored file is read, so a takeover is
        seen even when this process's view of the lease has not changed.
        """
        self._raise_if_done()
        self._check_stored(read_lease(self.table_dir), min_remaining_s)

    def release(self) -> None:
        """Stop renewing and remove the lease if it is still ours. Idempotent."""
        self._stop_renewing()
        with self._mutex:
            if self._released:
                return
            state = self.table_dir / STATE_DIR
            with _state_dir(self.table_dir, create=False) as fd:
                if fd is not None:
                    with _locked(fd, state):
                        try:
                            current = _read(fd, state)
                        except WarehouseError as exc:  # not a lease we wrote: not ours to remove
                            _log.warning("lease of table %s left alone: %s", self.table, exc)
                            current = None
                        if current is not None and current.token == self._info.token:
                            # Kept, marked released: the next holder's token counts on from it.
                            now = self._clock()
                            expires = max(current.acquired_at, min(now, current.expires_at))
                            _write(fd, state, replace(current, expires_at=expires), released=True)
            self._released = True  # only now: a release that failed may be called again

    def __enter__(self) -> Lease:
        return self
