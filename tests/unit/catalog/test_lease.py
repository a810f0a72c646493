"""The writer lease: one holder at a time, expiry, takeover of a dead local holder, renewal, release,
and mutual exclusion between threads and processes (fake clock and fake liveness where it matters,
real processes for the liveness check itself)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog import lease as lease_mod
from logstore_cli.catalog.lease import (
    LEASE_FILE,
    LOCK_FILE,
    Lease,
    LeaseHeldError,
    LeaseInfo,
    LeaseLostError,
    local_holder_dead,
    local_time,
    process_identity,
    read_lease,
)
from logstore_cli.errors import EXIT_FAILURE, InvalidInputError, WarehouseError
from logstore_cli.ingest.plan import STATE_DIR, JobPaths

TTL = 30.0


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def never_dead(info: LeaseInfo) -> bool:
    return False


def dead(*pids: int) -> Callable[[LeaseInfo], bool]:
    return lambda info: info.pid in pids


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "wh" / "db" / "t"
    path.mkdir(parents=True)
    return path


def take(table: Path, clock: FakeClock, *, job: str = "a", host: str = "h1", pid: int = 100,
         holder_dead: Callable[[LeaseInfo], bool] = never_dead) -> Lease:  # fmt: skip
    return Lease.acquire(
        table, job, TTL, clock=clock, host=host, pid=pid, table="db.t", holder_dead=holder_dead
    )


def poll(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def test_the_lease_lives_where_the_job_paths_say(table: Path) -> None:
    lease = take(table, FakeClock())
    assert Path(JobPaths(str(table), "a").lease) == table / STATE_DIR / LEASE_FILE
    stored = json.loads((table / STATE_DIR / LEASE_FILE).read_text())
    assert stored["job"] == "a" and stored["token"] == lease.info.token
    assert read_lease(table) == lease.info
    # nothing but the lease and its lock file: the temporary file was renamed into place
    assert sorted(os.listdir(table / STATE_DIR)) == [LEASE_FILE, LOCK_FILE]


def test_a_second_holder_is_refused_with_the_holder_named(table: Path) -> None:
    clock = FakeClock()
    first = take(table, clock, job="orders-cdc", host="h1", pid=4242)
    clock.advance(12)
    with pytest.raises(LeaseHeldError) as caught:
        take(table, clock, job="other", host="h2", pid=7)
    err = caught.value
    assert err.exit_code == EXIT_FAILURE
    assert "table db.t" in err.message
    assert "job 'orders-cdc' (host h1, pid 4242)" in err.message
    assert local_time(first.info.expires_at) in err.message
    assert f"(in {int(TTL - 12)} s)" in err.message
    assert err.hint is not None and "kill 4242" in err.hint and "h1" in err.hint
    assert err.holder == first.info
    assert read_lease(table) == first.info  # the refused call changed nothing


def test_a_live_holder_on_the_same_host_is_refused_too(table: Path) -> None:
    clock = FakeClock()
    take(table, clock, pid=100)
    with pytest.raises(LeaseHeldError):
        take(table, clock, pid=200, holder_dead=dead(999))


def test_expiry_lets_another_holder_in_and_the_old_one_has_lost(table: Path) -> None:
    clock = FakeClock()
    first = take(table, clock, job="a", host="h1")
    clock.advance(TTL - 0.001)
    with pytest.raises(LeaseHeldError):
        take(table, clock, job="b", host="h2")
    clock.advance(0.001)  # exactly at expires_at: expired
    second = take(table, clock, job="b", host="h2", pid=7)
    assert second.took_over == first.info
    assert read_lease(table) == second.info

    with pytest.raises(LeaseLostError) as renewed:
        first.renew()
    assert "job 'b' (host h2, pid 7) took over" in renewed.value.message
    with pytest.raises(LeaseLostError):
        first.check()
    second.check()  # the new holder is fine


def test_a_dead_holder_on_this_host_is_taken_over_at_once(table: Path) -> None:
    clock = FakeClock()
    first = take(table, clock, host="h1", pid=100)
    clock.advance(1)  # far from the expiry
    second = take(table, clock, job="restarted", host="h1", pid=101, holder_dead=dead(100))
    assert second.took_over == first.info
    assert read_lease(table) == second.info
    with pytest.raises(LeaseLostError):
        first.check()


def test_a_dead_looking_holder_on_another_host_is_waited_out(table: Path) -> None:
    clock = FakeClock()
    take(table, clock, host="h1", pid=100)
    with pytest.raises(LeaseHeldError):
        take(table, clock, host="h2", pid=100, holder_dead=dead(100))


def test_renew_extends_the_expiry_and_check_sees_it(table: Path) -> None:
    clock = FakeClock()
    lease = take(table, clock)
    clock.advance(20)
    lease.renew()
    assert lease.info.expires_at == clock.now + TTL
    assert read_lease(table) == lease.info
    clock.advance(TTL - 1)  # past the first expiry, within the renewed one
    lease.check()
    with pytest.raises(LeaseLostError, match="about to expire"):
        lease.check(min_remaining_s=5)
    clock.advance(1)
    with pytest.raises(LeaseLostError, match="expired"):
        lease.check()


def test_an_expired_lease_nobody_took_may_still_be_renewed(table: Path) -> None:
    clock = FakeClock()
    lease = take(table, clock)
    clock.advance(TTL + 5)
    lease.renew()  # the file still holds our token: no one else wrote in between
    lease.check()
    with pytest.raises(LeaseHeldError):
        take(table, clock, job="b", host="h2")


def test_renew_after_the_lease_file_was_removed_raises(table: Path) -> None:
    lease = take(table, FakeClock())
    (table / STATE_DIR / LEASE_FILE).unlink()
    with pytest.raises(LeaseLostError, match="is gone"):
        lease.renew()


def test_release_removes_only_our_own_lease_and_is_idempotent(table: Path) -> None:
    clock = FakeClock()
    first = take(table, clock, job="a", host="h1")
    clock.advance(TTL)
    second = take(table, clock, job="b", host="h2")
    first.release()
    assert read_lease(table) == second.info  # not ours any more: left alone
    first.release()
    second.release()
    assert read_lease(table) is None
    second.release()
    with pytest.raises(LeaseLostError, match="released"):
        second.check()
    with pytest.raises(LeaseLostError, match="released"):
        second.renew()
    third = take(table, clock, job="c", host="h3")  # free again at once
    assert third.took_over is None


def test_context_manager_releases(table: Path) -> None:
    with take(table, FakeClock()) as lease:
        assert read_lease(table) == lease.info
    assert read_lease(table) is None


def test_concurrent_acquirers_in_threads_exactly_one_wins(table: Path) -> None:
    n = 8
    barrier = threading.Barrier(n)
    results: list[str] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        barrier.wait()
        try:
            Lease.acquire(table, f"job{i}", TTL)
            outcome = "won"
        except LeaseHeldError:
            outcome = "held"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["held"] * (n - 1) + ["won"]


def _acquire_in_process(table: str, job: str, start: Any, done: Any, results: Any) -> None:
    start.wait()
    try:
        Lease.acquire(Path(table), job, TTL)
        results.put("won")
    except LeaseHeldError:
        results.put("held")
    except BaseException as exc:  # reported, not hidden in the child
        results.put(f"error {exc!r}")
    done.wait()  # stay alive until all tried: a dead winner may be taken over on this host


def test_concurrent_acquirers_in_processes_exactly_one_wins(table: Path) -> None:
    n = 4
    mp = multiprocessing.get_context("spawn")
    start, done, results = mp.Barrier(n), mp.Barrier(n), mp.Queue()
    procs = [
        mp.Process(target=_acquire_in_process, args=(str(table), f"job{i}", start, done, results))
        for i in range(n)
    ]
    for p in procs:
        p.start()
    outcomes = sorted(results.get(timeout=60) for _ in range(n))
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert outcomes == ["held"] * (n - 1) + ["won"]
    holder = read_lease(table)
    assert holder is not None and holder.pid in {p.pid for p in procs}


def test_keep_alive_renews_until_release(table: Path) -> None:
    clock = FakeClock()
    lease = take(table, clock)
    first_expiry = lease.info.expires_at
    lease.keep_alive(0.01)
    clock.advance(10)
    poll(lambda: (read_lease(table) or lease.info).expires_at == clock.now + TTL)
    assert lease.renewing
    lease.check()
    assert lease.info.expires_at > first_expiry
    lease.release()
    assert not lease.renewing
    assert read_lease(table) is None


def test_keep_alive_remembers_a_lost_lease_for_check(table: Path) -> None:
    clock = FakeClock()
    lease = take(table, clock, job="a", host="h1")
    clock.advance(TTL)
    # Taken over while the renewal thread is not running yet, then the thread finds it lost.
    other = take(table, clock, job="b", host="h2", pid=9)
    lease.keep_alive(0.01)
    poll(lambda: not lease.renewing)
    other.release()  # the file is gone now; check still reports who took the lease
    with pytest.raises(LeaseLostError, match=r"job 'b' \(host h2, pid 9\) took over"):
        lease.check()


def test_a_failing_renewal_is_reported_by_check_once_the_lease_runs_out(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    lease = take(table, clock)
    attempts: list[int] = []

    def broken_write(*args: object) -> None:
        attempts.append(1)
        raise WarehouseError("cannot write lease.json: No space left on device")

    monkeypatch.setattr(lease_mod, "_write", broken_write)
    lease.keep_alive(0.01)
    poll(lambda: len(attempts) >= 2)  # retried: an I/O error may pass
    assert lease.renewing
    lease.check()  # still within the TTL
    clock.advance(TTL)
    with pytest.raises(LeaseLostError, match="No space left on device"):
        lease.check()
    monkeypatch.undo()  # a release writes the record too (marked released)
    lease.release()


def test_bad_ttl_and_interval_are_refused(table: Path) -> None:
    for ttl in (0, -1, float("nan"), float("inf")):
        with pytest.raises(InvalidInputError):
            Lease.acquire(table, "a", ttl)
    lease = take(table, FakeClock())
    for interval in (0, TTL, TTL + 1):
        with pytest.raises(InvalidInputError):
            lease.keep_alive(interval)


# -- files: symlinks, corrupt leases, temporaries ------------------------------------------------


def test_a_symlinked_state_directory_is_refused(table: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (table / STATE_DIR).symlink_to(elsewhere)
    with pytest.raises(WarehouseError, match="symlink"):
        take(table, FakeClock())
    with pytest.raises(WarehouseError, match="symlink"):
        read_lease(table)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("name", [LEASE_FILE, LOCK_FILE])
def test_a_symlinked_lease_or_lock_file_is_refused(table: Path, tmp_path: Path, name: str) -> None:
    target = tmp_path / "target"
    target.write_text("untouched")
    (table / STATE_DIR).mkdir()
    (table / STATE_DIR / name).symlink_to(target)
    with pytest.raises(WarehouseError, match="symlink"):
        take(table, FakeClock())
    assert target.read_text() == "untouched"


def test_a_corrupt_lease_file_is_an_error_that_says_what_to_do(table: Path) -> None:
    (table / STATE_DIR).mkdir()
    (table / STATE_DIR / LEASE_FILE).write_text('{"job": "x"')
    with pytest.raises(WarehouseError) as caught:
        take(table, FakeClock())
    assert "is not a logstore lease" in caught.value.message
    assert caught.value.hint is not None and "delete the file" in caught.value.hint


def test_release_leaves_a_file_that_is_not_our_lease(table: Path) -> None:
    lease = take(table, FakeClock())
    path = table / STATE_DIR / LEASE_FILE
    path.write_text("overwritten by hand")
    lease.release()  # no error: whatever it is, it is not ours to remove
    assert path.read_text() == "overwritten by hand"


def test_temporaries_of_a_killed_writer_are_cleaned_up(table: Path) -> None:
    (table / STATE_DIR).mkdir()
    stale = table / STATE_DIR / ".lease.json.deadbeef.0000.tmp"
    stale.write_text("{")
    take(table, FakeClock())
    assert not stale.exists()


def test_the_table_directory_must_exist(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match="does not exist"):
        take(tmp_path / "missing", FakeClock())
    assert read_lease(tmp_path / "missing") is None


def test_the_fencing_token_grows_and_the_writers_to_fence_pass_on(table: Path) -> None:
    clock = FakeClock()
    first = take(table, clock, job="first")
    assert (first.info.fence, first.info.writer, first.info.unfenced) == (1, None, ())
    first.set_writer("w-1")
    assert read_lease(table) == first.info and first.info.writer == "w-1"
    first.release()
    assert read_lease(table) is None  # released: kept on disk, for its token, but not a lease
    second = take(table, clock, job="second")
    assert second.took_over is None and (second.info.fence, second.info.unfenced) == (2, ())
    second.set_writer("w-2")
    clock.advance(TTL)
    third = take(table, clock, job="third", host="h2")  # expired, not released: w-2 is owed
    assert (third.info.fence, third.info.unfenced) == (3, ("w-2",))
    clock.advance(TTL)  # third died before it fenced anyone or named its writer
    fourth = take(table, clock, job="fourth", host="h3")
    assert (fourth.info.fence, fourth.info.unfenced) == (4, ("w-2",))
    fourth.set_writer("w-4")
    stored = read_lease(table)
    assert stored is not None and (stored.writer, stored.unfenced) == ("w-4", ())
    with pytest.raises(LeaseLostError):
        third.set_writer("w-3")
    assert read_lease(table) == fourth.info


def test_a_lease_of_an_older_version_loads_and_counts_as_token_0(table: Path) -> None:
    old = {"format": 1, "job": "old", "host": "h9", "pid": 7, "process": None, "token": "t",
           "acquired_at": 1.0, "expires_at": 2.0}  # fmt: skip
    (table / STATE_DIR).mkdir()
    (table / STATE_DIR / LEASE_FILE).write_text(json.dumps(old))
    stored = read_lease(table)
    assert stored is not None and (stored.fence, stored.writer, stored.unfenced) == (0, None, ())
    lease = take(table, FakeClock())  # expired long ago; it named no writer, so none is owed
    assert lease.took_over == stored and (lease.info.fence, lease.info.unfenced) == (1, ())


@pytest.mark.parametrize(
    "change",
    [
        {"fence": -1},
        {"fence": True},
        {"fence": "1"},
        {"writer": ""},
        {"writer": 3},
        {"unfenced": "w-1"},
        {"unfenced": [""]},
        {"format": 2},
        {"pid": 0},
        {"pid": True},
        {"job": ""},
        {"expires_at": "soon"},
        {"process": 5},
        {"expires_at": 1e308},
        {"expires_at": 10**400},
        {"expires_at": float("nan")},
        {"acquired_at": -1.0},
        {"acquired_at": 3.0},  # after its expiry
        {"pid": 10**30},
    ],
)
def test_lease_json_is_checked(change: dict[str, Any]) -> None:
    info = LeaseInfo("a", "h", 1, "tok", 1.0, 2.0, None, 7, "w-1", ("w-0",))
    assert LeaseInfo.from_json(info.to_json()) == info
    with pytest.raises(ValueError):
        LeaseInfo.from_json(info.to_json() | change)


def test_local_time_of_an_out_of_range_value_is_the_number_not_a_crash() -> None:
    assert local_time(1e308) == "1e+308 s after 1970 (not a valid time)"


# -- is the holder's process alive? (real processes) ---------------------------------------------


def _child() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)  # fmt: skip


def _info(pid: int, process: str | None) -> LeaseInfo:
    return LeaseInfo("a", "h", pid, "tok", 0.0, 1.0, process)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_liveness_by_pid_and_start_time() -> None:
    child = _child()
    try:
        identity = process_identity(child.pid)
        assert identity is not None
        assert not local_holder_dead(_info(child.pid, identity))
        # the same pid with another start time: the pid was reused by another process
        machine = identity.rpartition(":")[0]
        assert local_holder_dead(_info(child.pid, f"{machine}:1"))
        # recorded under another boot or pid namespace: cannot tell, so alive
        assert not local_holder_dead(_info(child.pid, "other-boot/pid:[1]:1"))
        child.kill()
        poll(lambda: process_identity(child.pid) is None)  # a zombie until reaped: dead already
        assert local_holder_dead(_info(child.pid, identity))
    finally:
        child.kill()
        child.wait()
    assert local_holder_dead(_info(child.pid, identity))
    assert local_holder_dead(_info(child.pid, None))  # without an identity: no such pid


def test_our_own_process_is_alive() -> None:
    assert not local_holder_dead(_info(os.getpid(), process_identity(os.getpid())))
    assert not local_holder_dead(_info(os.getpid(), None))


def test_a_killed_job_restarted_on_this_host_takes_over_at_once(table: Path) -> None:
    """The real liveness check: a child takes the lease and is killed; the restart needs no wait."""
    code = (
        "import sys; from pathlib import Path; from logstore_cli.catalog.lease import Lease\n"
        f"Lease.acquire(Path({str(table)!r}), 'ingest', 3600)\n"
        "print('taken', flush=True); sys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "taken"
        with pytest.raises(LeaseHeldError):
            Lease.acquire(table, "ingest", 3600)  # alive: refused
    finally:
        child.kill()
        child.wait()
    lease = Lease.acquire(table, "ingest", 3600)
    assert lease.took_over is not None and lease.took_over.pid == child.pid
    lease.release()
