"""What the lease on the storage seam (``StorageLease``) must do on every backend, as plain checks:
the unit suite runs them on ``LocalStorage``, the ``s3`` suite against the real S3 server."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from logstore_cli.catalog.lease import LeaseHeldError, LeaseInfo, LeaseLostError
from logstore_cli.catalog.storage_lease import KEY, StorageLease, read_stored_lease
from logstore_cli.errors import WarehouseError
from logstore_cli.storage import Storage
from tests.storage_contract import race

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


def take(
    table: Storage,
    clock: Callable[[], float],
    *,
    job: str = "a",
    host: str = "h1",
    pid: int = 100,
    holder_dead: Callable[[LeaseInfo], bool] = never_dead,
) -> StorageLease:
    return StorageLease.acquire(
        table, job, TTL, clock=clock, host=host, pid=pid, table="db.t", holder_dead=holder_dead
    )


def _race_for(table: Storage) -> tuple[list[int], dict[int, StorageLease], list[LeaseHeldError]]:
    """8 jobs (threads) released at once take the lease of ``table``: who won, what each winner
    holds, and the refusals of the others."""
    held: dict[int, StorageLease] = {}
    refused: list[LeaseHeldError] = []

    def attempt(i: int) -> bool:
        try:
            held[i] = take(table, time.time, job=f"job{i}", pid=1000 + i)
        except LeaseHeldError as exc:
            refused.append(exc)
            return False
        return True

    return race(8, attempt), held, refused


def check_racers_have_one_winner(warehouse: Storage, trials: int = 5) -> None:
    """8 jobs start on one table at once: exactly one holds the lease, every trial; each loser is
    refused naming the winner."""
    for trial in range(trials):
        table = warehouse.child(f"db/race{trial}")
        won, held, refused = _race_for(table)
        assert len(won) == 1, f"trial {trial}: {won} all took the lease"
        assert len(refused) == 7
        winner = held[won[0]]
        assert {exc.holder.token for exc in refused} == {winner.info.token}
        stored = read_stored_lease(table)
        assert stored is not None and stored.token == winner.info.token
        winner.release()


def check_a_live_lease_is_refused_and_an_expired_one_taken_over(table: Storage) -> None:
    clock = FakeClock()
    first = take(table, clock, job="first")
    with pytest.raises(LeaseHeldError) as caught:
        take(table, clock, job="second", host="h2")
    assert caught.value.holder.job == "first"
    clock.advance(TTL + 1)
    second = take(table, clock, job="second", host="h2")
    assert second.took_over is not None and second.took_over.token == first.info.token
    stored = read_stored_lease(table)
    assert stored is not None and stored.job == "second"


def check_a_stale_holder_cannot_renew_check_or_release(table: Storage) -> None:
    """A holder paused past its TTL while another job took over: every step it takes fails, and
    none changes the new holder's lease."""
    clock = FakeClock()
    stale = take(table, clock, job="stale")
    clock.advance(TTL + 1)
    fresh = take(table, clock, job="fresh", host="h2")
    with pytest.raises(LeaseLostError, match="took over"):
        stale.renew()
    with pytest.raises(LeaseLostError):
        stale.check()
    stale.release()  # not ours any more: left alone
    stored = read_stored_lease(table)
    assert stored is not None and stored.token == fresh.info.token
    fresh.renew()
    fresh.check()


def check_renewal_extends_and_an_untaken_expired_lease_renews(table: Storage) -> None:
    clock = FakeClock()
    lease = take(table, clock)
    clock.advance(TTL - 1)
    lease.renew()
    stored = read_stored_lease(table)
    assert stored is not None and stored.expires_at == clock.now + TTL
    clock.advance(TTL + 5)  # expired, but nobody took it
    with pytest.raises(LeaseLostError, match="expired"):
        lease.check()
    lease.renew()
    lease.check()


def check_release_then_reacquire(table: Storage) -> None:
    clock = FakeClock()
    first = take(table, clock, job="first")
    first.release()
    first.release()  # idempotent
    assert read_stored_lease(table) is None
    blob = table.read(KEY)
    assert blob is not None and b'"released":true' in blob.data  # overwritten, not deleted
    with pytest.raises(LeaseLostError, match="released"):
        first.check()
    with pytest.raises(LeaseLostError, match="released"):
        first.renew()
    second = take(table, clock, job="second", host="h2")  # at once: no waiting out the TTL
    assert second.took_over is None
    stored = read_stored_lease(table)
    assert stored is not None and stored.job == "second"


def check_a_dead_local_holder_is_taken_over_at_once(table: Storage) -> None:
    clock = FakeClock()
    take(table, clock, job="crashed", pid=111)
    with pytest.raises(LeaseHeldError):
        take(table, clock, job="other", host="h2", holder_dead=lambda info: True)
    lease = take(table, clock, job="restarted", pid=222, holder_dead=lambda info: info.pid == 111)
    assert lease.took_over is not None and lease.took_over.pid == 111


def check_keep_alive_renews_until_release(table: Storage) -> None:
    lease = StorageLease.acquire(table, "kept", 2.0, table="db.t")
    first_expiry = lease.info.expires_at
    lease.keep_alive(0.05)
    deadline = time.monotonic() + 20
    while True:
        stored = read_stored_lease(table)
        if stored is not None and stored.expires_at > first_expiry:
            break
        assert time.monotonic() < deadline, "the lease was never renewed"
        time.sleep(0.02)
    lease.check()
    lease.release()
    assert not lease.renewing
    assert read_stored_lease(table) is None


def check_something_else_is_not_taken_for_a_lease(table: Storage) -> None:
    table.write(KEY, b"not json")
    with pytest.raises(WarehouseError, match="not a logstore lease"):
        take(table, FakeClock())


def check_the_fencing_token_grows_and_the_writers_to_fence_pass_on(table: Storage) -> None:
    """Every acquisition's token is the stored record's + 1 (a released one's too); a taker of a
    lease that was not released owes a fence to its writer, and passes the debt on if it dies
    before paying it (recording its own writer with nothing owed)."""
    clock = FakeClock()
    first = take(table, clock, job="first")
    assert (first.info.fence, first.info.writer, first.info.unfenced) == (1, None, ())
    first.set_writer("w-1")
    stored = read_stored_lease(table)
    assert stored is not None and (stored.fence, stored.writer) == (1, "w-1")
    first.release()
    second = take(table, clock, job="second")  # a released lease: its writer stopped by itself
    assert (second.info.fence, second.info.unfenced) == (2, ())
    second.set_writer("w-2")
    clock.advance(TTL + 1)
    third = take(table, clock, job="third", host="h2")  # expired, not released: w-2 is owed
    assert third.took_over is not None and third.took_over.writer == "w-2"
    assert (third.info.fence, third.info.unfenced) == (3, ("w-2",))
    clock.advance(TTL + 1)  # third died before it fenced anyone or named its writer
    fourth = take(table, clock, job="fourth", host="h3")
    assert (fourth.info.fence, fourth.info.unfenced) == (4, ("w-2",))
    fourth.set_writer("w-4")  # the job fenced w-2
    stored = read_stored_lease(table)
    assert stored is not None and (stored.writer, stored.unfenced, stored.fence) == ("w-4", (), 4)
    with pytest.raises(LeaseLostError):
        third.set_writer("w-3")  # a stale holder cannot write its writer over the new lease
    fourth.release()
    assert take(table, clock, job="fifth").info.fence == 5
