"""How the suite splits over xdist workers (tests/plugins/scheduling.py): modules sharing a server
are one group, every other module its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.plugins.scheduling import module_groups


@dataclass
class FakeItem:
    nodeid: str
    fixturenames: tuple[str, ...] = ()
    markers: tuple[str, ...] = field(default=())

    def iter_markers(self) -> Any:
        return [getattr(pytest.mark, name).mark for name in self.markers]

    @property
    def own_markers(self) -> Any:  # the fake's marks are its own (a parameter's, a function's)
        return self.iter_markers()


def test_modules_sharing_a_server_are_one_group_and_the_rest_their_own() -> None:
    items = [
        FakeItem("tests/a.py::t1", ("s3_server", "spark")),
        FakeItem("tests/a.py::t2"),
        FakeItem("tests/b.py::t1", ("s3_bucket", "s3_server")),
        FakeItem("tests/c.py::t1", ("spark",)),
        FakeItem("tests/d.py::t1", ("kafka_cluster",)),
        FakeItem("tests/e.py::t1", (), ("terminal",)),
    ]
    groups = module_groups(items)  # type: ignore[arg-type]
    assert groups == {
        "tests/a.py": "s3",
        "tests/b.py": "s3",
        "tests/c.py": "tests/c.py",
        "tests/d.py": "kafka-cluster",
        "tests/e.py": "terminal",
    }


def test_a_module_using_two_servers_joins_their_groups() -> None:
    items = [
        FakeItem("tests/a.py::t1", ("s3_server",)),
        FakeItem("tests/b.py::t1", ("pulsar",)),
        FakeItem("tests/c.py::t1", ("s3_server",)),
        FakeItem("tests/c.py::t2", ("pulsar",)),
    ]
    groups = module_groups(items)  # type: ignore[arg-type]
    assert set(groups.values()) == {"pulsar+s3"}


def test_a_case_marked_with_a_server_joins_its_group_alone_without_naming_its_fixture() -> None:
    """A backend parametrization asks for its server at run time: its mark places the case, by
    itself, in its server's group; the module's other cases stay out of that group, and one
    module's S3 and HDFS cases do not join the two servers' groups."""
    items = [
        FakeItem("tests/a.py::t1", ("s3_server",)),
        FakeItem("tests/b.py::t[local]", ("backend",)),
        FakeItem("tests/b.py::t[s3]", ("backend",), ("s3",)),
        FakeItem("tests/b.py::t[hdfs]", ("backend",), ("hdfs",)),
        FakeItem("tests/c.py::t1", ("hdfs_server",), ("hdfs",)),
    ]
    groups = module_groups(items)  # type: ignore[arg-type]
    assert groups == {
        "tests/a.py": "s3",
        "tests/b.py": "tests/b.py",
        "tests/b.py::t[s3]": "s3",
        "tests/b.py::t[hdfs]": "hdfs",
        "tests/c.py": "hdfs",
    }


def test_a_case_marked_pulsar_joins_the_pulsar_group_alone() -> None:
    """A case whose log is on Pulsar asks for the standalone at run time (the crash test's
    ``local-pulsar``): its mark places it, by itself, with the modules using the ``pulsar``
    fixture; its module's Kafka cases stay apart. A module's own ``pulsar`` mark (not the case's)
    places nothing."""
    items = [
        FakeItem("tests/a.py::t1", ("pulsar",)),
        FakeItem("tests/b.py::t[local]", ("backend", "log")),
        FakeItem("tests/b.py::t[local-pulsar]", ("backend", "log"), ("pulsar",)),
        FakeItem("tests/c.py::t1", ("spark",)),
    ]
    groups = module_groups(items)  # type: ignore[arg-type]
    assert groups == {
        "tests/a.py": "pulsar",
        "tests/b.py": "tests/b.py",
        "tests/b.py::t[local-pulsar]": "pulsar",
        "tests/c.py": "tests/c.py",
    }
