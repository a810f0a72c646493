#!/usr/bin/env python3
"""Mutation check of the write protocol: apply each mutant below to a copy of the package, run the
unit tests that guard the protocol against it, and report which mutants the tests killed.

    .venv/bin/python scripts/mutate_protocol.py            # every mutant
    .venv/bin/python scripts/mutate_protocol.py -k lease   # those whose name contains 'lease'

Each mutant is one small, plausible mistake in ``logstore_cli/ingest/epoch.py`` (the protocol) or
``logstore_cli/read/verify.py`` (what verify says about the markers). A mutant *survives* when the
tests still pass with it: then the tests do not guard that line. The repository itself is never
changed: every mutant runs in a fresh temporary copy. Exit 0 when every mutant was killed, 1 when
one survived, 2 when a mutant no longer applies (the code it targets changed: update the list).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EPOCH = "logstore_cli/ingest/epoch.py"
VERIFY = "logstore_cli/read/verify.py"
TESTS = ["tests/unit/ingest/test_epoch.py", "tests/unit/read/test_verify.py"]


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    edits: tuple[tuple[str, str], ...]  # (text that must occur once, its replacement)


def _m(name: str, file: str, *edits: tuple[str, str]) -> Mutant:
    return Mutant(name, file, edits)


PUBLISH_LATEST = (
    "            self.log.publish_markers(CommitMarker(latest.epoch, latest.version))\n"
)
REPUBLISH = "                self._publish(CommitMarker(done.epoch, done.version))\n"
CHECK_AT_COMMIT = "            self.lease.check(self.commit_margin_s)\n"
COMMIT = "            version, retries = self._commit(self.table, batch, eid, offsets)\n"
PUBLISH = "        self._publish(CommitMarker(eid, version))\n"
PRODUCE = "        produced = self.log.produce(batch, eid) if self.log is not None else None\n"

MUTANTS = [
    _m("start-up rule skipped", EPOCH, (PUBLISH_LATEST, "            pass\n")),
    _m(
        "start-up rule only for the job's own writer",
        EPOCH,
        (
            "        if latest is not None:\n",
            "        if latest is not None and latest.epoch.writer == self.writer:\n",
        ),
    ),
    _m("already-committed epoch not re-published", EPOCH, (REPUBLISH, "                pass\n")),
    _m(
        "already-committed epoch re-published as the new attempt",
        EPOCH,
        (REPUBLISH, "                self._publish(CommitMarker(eid, done.version))\n"),
    ),
    _m(
        "already-committed check skipped",
        EPOCH,
        (
            "            done = self.table.committed(self.writer, epoch)\n",
            "            done = None\n",
        ),
    ),
    _m("no lease check before the commit", EPOCH, (CHECK_AT_COMMIT, "")),
    _m(
        "lease checked before the commit without the margin",
        EPOCH,
        (CHECK_AT_COMMIT, "            self.lease.check()\n"),
    ),
    _m(
        "lease checked before producing instead of before the commit",
        EPOCH,
        (CHECK_AT_COMMIT, ""),
        (PRODUCE, "        self.lease.check(self.commit_margin_s)\n" + PRODUCE),
    ),
    _m(
        "no lease check when the epoch begins",
        EPOCH,
        (
            "        self.lease.check()\n        if self.schema is not None:",
            "        if self.schema is not None:",
        ),
    ),
    _m(
        "outside writes not carried before an epoch",
        EPOCH,
        ("        self._carry()  # outside writes", "        pass  # outside writes"),
    ),
    _m(
        "outside writes not carried at start-up",
        EPOCH,
        ("        self._carry()\n        return latest", "        return latest"),
    ),
    _m(
        "carry committed without the lease check",
        EPOCH,
        (
            "        self.lease.check(self.commit_margin_s)\n        carried_as",
            "        carried_as",
        ),
    ),
    _m(
        "carry's marker names no Delta version",
        EPOCH,
        (
            "        self._publish(CommitMarker(carry, carried_as))\n",
            "        self._publish(CommitMarker(carry, None))\n",
        ),
    ),
    _m(
        "carry recorded in Delta before its records are in the log",
        EPOCH,
        (
            "        produced = self.log.produce(changes, carry)\n",
            "        self.table.mark(carry, {})\n        produced = self.log.produce(changes, carry)\n",
        ),
    ),
    _m(
        "marker written before the commit",
        EPOCH,
        (PUBLISH, ""),
        (
            COMMIT,
            "            guess = self.table.latest()\n"
            "            self._publish(CommitMarker(eid, guess.version + 1 if guess else 1))\n"
            + COMMIT,
        ),
    ),
    _m(
        "marker names no Delta version",
        EPOCH,
        (PUBLISH, "        self._publish(CommitMarker(eid, None))\n"),
    ),
    _m(
        "attempt id reused",
        EPOCH,
        (
            "        attempt = self.new_attempt()\n",
            "        attempt = self._last_attempt or self.new_attempt()\n",
        ),
        ("        if attempt == self._last_attempt:\n", "        if False:\n"),
    ),
    _m(
        "epoch number skipped",
        EPOCH,
        (
            "        eid = EpochId(self.writer, epoch, self._attempt())\n",
            "        eid = EpochId(self.writer, epoch + 1, self._attempt())\n",
        ),
    ),
    _m(
        "commit records no end offsets",
        EPOCH,
        (COMMIT, "            version, retries = self._commit(self.table, batch, eid, {})\n"),
    ),
    _m(
        "quarantine skipped",
        EPOCH,
        (
            "        quarantined = self.quarantine.write(batch, self.writer, epoch)\n",
            "        quarantined = 0\n",
        ),
    ),
    _m(
        "epochs run without the start-up step",
        EPOCH,
        ("        if not self._started:\n", "        if False:\n"),
    ),
    _m(
        "verify: no note when markers name another attempt than Delta committed",
        VERIFY,
        ("                if attempts != {commit.epoch.attempt}:\n", "                if False:\n"),
    ),
]


def _copy(target: Path) -> None:
    for name in ("logstore_cli", "tests"):
        shutil.copytree(
            ROOT / name,
            target / name,
            ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"),
        )
    shutil.copy2(ROOT / "pyproject.toml", target / "pyproject.toml")


def _apply(root: Path, mutant: Mutant) -> None:
    path = root / mutant.file
    text = path.read_text("utf-8")
    for old, new in mutant.edits:
        if text.count(old) != 1:
            raise LookupError(
                f"{mutant.name!r}: the text to mutate occurs {text.count(old)} times in {mutant.file}: {old!r}"
            )
        text = text.replace(old, new)
    path.write_text(text, "utf-8")


def _run_tests(root: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "HYPOTHESIS_PROFILE": os.environ.get("HYPOTHESIS_PROFILE", "ci"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS],
        cwd=root, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-k", default="", help="only the mutants whose name contains this")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if args.k in m.name]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="logstore-mutants-") as tmp:
        clean = Path(tmp) / "clean"
        _copy(clean)
        baseline = _run_tests(clean)
        if baseline.returncode != 0:
            print("the tests fail without any mutant:\n" + baseline.stdout[-3000:], file=sys.stderr)
            return 2
        survived: list[str] = []
        test_seconds = 0.0  # what pytest reports: the tests' own time, without its start-up
        for i, mutant in enumerate(chosen):
            work = Path(tmp) / f"m{i}"
            shutil.copytree(clean, work)
            try:
                _apply(work, mutant)
            except LookupError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            t0 = time.monotonic()
            result = _run_tests(work)
            seconds = time.monotonic() - t0
            killed = result.returncode != 0
            if not killed:
                survived.append(mutant.name)
            ran = re.search(
                r" in ([0-9.]+)s", result.stdout.splitlines()[-1] if result.stdout else ""
            )
            test_seconds += float(ran.group(1)) if ran else seconds
            failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
            by = failed[0].removeprefix("FAILED ").split(" - ")[0] if failed else ""
            print(
                f"{'killed  ' if killed else 'SURVIVED'} {seconds:5.1f} s  {mutant.name}"
                + (f"  [{by}]" if by else "")
            )
            shutil.rmtree(work)
    total = time.monotonic() - started
    print(
        f"\n{len(chosen) - len(survived)}/{len(chosen)} mutants killed in {total:.0f} s "
        f"({test_seconds:.1f} s of it in the tests themselves; tests: {', '.join(TESTS)})"
    )
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
