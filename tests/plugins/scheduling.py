"""How the suite splits over pytest-xdist workers (``scripts/test.sh`` runs two: the tests wait on
JVMs, brokers and subprocess jobs far more than they compute, so two workers on two cores finish
the run in a little over half the time).

The unit of work is a *group*: a test module, so that its module-scoped fixtures (a Spark job run
once for several assertions) start once; modules whose tests use the same lazily started server
(the three-node Kafka cluster, the Spark standalone cluster, S3, Pulsar, HDFS, the ACL broker), or
the same machine-wide resource (tmux, the Flink mini cluster), are one group, so that each server
starts once per run and never on both workers. Groups that run real jobs go first and the unit
tests last, so that the unit tests fill the gap when one worker finishes its last long group.

The scheduler runs in the controller, which collects nothing and sees test ids only: the workers
write each module's group to a file the controller names (``GROUPS_FILE_ENV``), and
``GroupScheduling`` maps an id's module to its group from there. (xdist's own ``loadgroup`` marks an
id with ``@group``, which no longer reaches the id on pytest 9, where ids are computed.) Without
xdist (``-n 0`` or no plugin), only the order applies.

A lazily started server is stopped after the last test that uses it (``stop_after_last_user``),
not at the end of the session: on two cores, idle JVMs (three Kafka nodes, a Spark cluster, a
Pulsar standalone) would otherwise take CPU from every test after them. Its users are one group,
run in order on one worker, so no test after the last one asks for it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterable

# A fixture a test uses (directly or through another fixture) -> the group of every module using it.
SERVER_GROUPS = {
    "kafka_cluster": "kafka-cluster",
    "spark_standalone": "spark-cluster",
    "s3_server": "s3",
    "pulsar": "pulsar",
    "hdfs_server": "hdfs",
    "authz_broker": "authz-broker",
}
# Where the workers leave the module -> group map for the controller's scheduler (a harness
# variable: the isolation plugin keeps LOGSTORE_TEST_*, and logstore never reads it).
GROUPS_FILE_ENV = "LOGSTORE_TEST_GROUPS_FILE"
# A marker -> its group: one shared resource of the machine.
MARKER_GROUPS = {"terminal": "terminal", "flink": "flink"}
# A marker -> the server fixture a test so marked uses: a test parametrized over backends asks for
# the server of its parameter at run time (``request.getfixturevalue``), which its fixture names,
# computed at collection, cannot show; its mark (``pytest.param(..., marks=pytest.mark.s3)``) does.
# Such a case is a unit of its own (its node id), not its module's: it joins its server's group and
# the module's other cases stay apart, so a module parametrized over S3 and HDFS does not tie the
# two servers' groups (and the module's local cases) into one worker's share.
MARKER_SERVERS = {"s3": "s3_server", "hdfs": "hdfs_server", "pulsar": "pulsar"}
# Markers of the groups that run first: the longest units of work.
HEAVY_MARKERS = frozenset({"crash", "fault", "stop", "demo", "flink", "terminal", *SERVER_GROUPS})


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _marked_servers(item: pytest.Item) -> set[str]:
    """The server fixtures ``item`` uses by its own marks (its parameter's or its function's, not
    its module's: a module marked ``hdfs`` may start its own server) and not by its fixture
    names."""
    own = getattr(item, "own_markers", ())
    marked = {MARKER_SERVERS[m.name] for m in own if m.name in MARKER_SERVERS}
    return marked - set(getattr(item, "fixturenames", ()))


def _unit(item: pytest.Item) -> str:
    """What is scheduled as one: the test's module, or the test alone when only its marks say
    which server it uses (see ``MARKER_SERVERS``)."""
    return item.nodeid if _marked_servers(item) else _module(item)


def _servers(item: pytest.Item) -> set[str]:
    """The server fixtures ``item`` uses: by its fixture names, or by its marks."""
    return (SERVER_GROUPS.keys() & set(getattr(item, "fixturenames", ()))) | _marked_servers(item)


def _resources(item: pytest.Item) -> set[str]:
    names = {SERVER_GROUPS[f] for f in _servers(item)}
    names |= {MARKER_GROUPS[m.name] for m in item.iter_markers() if m.name in MARKER_GROUPS}
    return names


def _heavy(item: pytest.Item) -> bool:
    if any(m.name in HEAVY_MARKERS for m in item.iter_markers()):
        return True
    return bool(_servers(item))


def module_groups(items: Iterable[pytest.Item]) -> dict[str, str]:
    """Each unit (a module, or a test placed by its marks: ``_unit``) -> its group: units sharing a
    resource joined (union-find over units)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for item in items:
        module = _unit(item)
        find(module)
        for resource in _resources(item):
            union(module, "@" + resource)  # '@' sorts first: a resource names its group
    groups: dict[str, list[str]] = defaultdict(list)
    for node in list(parent):
        groups[find(node)].append(node)
    named: dict[str, str] = {}
    for members in groups.values():
        resources = sorted(m[1:] for m in members if m.startswith("@"))
        name = "+".join(resources)
        for member in members:
            if not member.startswith("@"):
                named[member] = name or member
    return named


# Server fixture -> the last collected test using it, and the registered stops of started ones.
_last_user: dict[str, pytest.Item] = {}
_stops: dict[str, Callable[[], None]] = {}


def stop_after_last_user(fixture: str, stop: Callable[[], None]) -> Callable[[], None]:
    """Have ``stop`` run after the teardown of the last test using ``fixture`` (a session
    fixture of ``SERVER_GROUPS``); the returned stop (for the fixture's own finalizer) runs it at
    most once."""
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            stop()

    _stops[fixture] = once
    return once


def pytest_collection_finish(session: pytest.Session) -> None:
    # The final order (after any plugin's reordering or deselection): the order tests run in.
    _last_user.clear()
    for item in session.items:
        for fixture in _servers(item):
            _last_user[fixture] = item


@pytest.hookimpl(trylast=True)  # after pytest's own teardown: the test's fixtures are gone
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    for fixture, last in list(_last_user.items()):
        if last is item and fixture in _stops:
            _stops.pop(fixture)()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = module_groups(items)
    heavy: set[str] = set()
    unit = Path(str(config.rootpath)) / "tests" / "unit"
    tier: dict[str, int] = {}
    for item in items:
        group = groups[_unit(item)]
        if _heavy(item):
            heavy.add(group)
        is_unit = unit in Path(str(item.path)).parents
        tier[group] = min(tier.get(group, 2), 2 if is_unit else 1)
    for group in heavy:
        tier[group] = 0
    first_seen = {g: i for i, g in reversed(list(enumerate(groups[_unit(t)] for t in items)))}
    # A stable sort: a group's tests together, in their own order.
    items.sort(key=lambda t: (tier[groups[_unit(t)]], first_seen[groups[_unit(t)]]))
    target = os.environ.get(GROUPS_FILE_ENV)
    if target and hasattr(config, "workerinput"):  # an xdist worker: tell the controller
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target))
        with os.fdopen(fd, "w") as fh:
            json.dump(groups, fh)
        os.replace(tmp, target)  # every worker writes the same map: whole files only


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or config.getvalue("dist") in (None, "no"):
        return
    # The controller: its workers inherit the environment, so they find the file.
    fd, path = tempfile.mkstemp(prefix="logstore-test-groups-", suffix=".json")
    os.close(fd)
    os.environ[GROUPS_FILE_ENV] = path
    config.add_cleanup(lambda: os.unlink(path) if os.path.exists(path) else None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class GroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """xdist's loadgroup with this module's groups (read from the workers' file once they
        have collected: ``schedule`` runs after that), and the collection's order kept (the
        order above, not the largest group first)."""

        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                path = os.environ.get(GROUPS_FILE_ENV, "")
                try:
                    with open(path, encoding="utf-8") as fh:
                        self._groups = dict(json.load(fh))
                except (OSError, ValueError):  # no map: each module its own unit
                    self._groups = {}
            if nodeid in self._groups:  # a test placed by its marks (``_unit``)
                return self._groups[nodeid]
            module = nodeid.split("::", 1)[0]
            return self._groups.get(module, module)

    config.option.loadscopereorder = False
    return GroupScheduling(config, log)
