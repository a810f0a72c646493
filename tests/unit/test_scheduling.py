"""How the suite splits over xdist workers (tests/plugins/scheduling.py): modules sharing a server
are one group, every other module its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.plugins.scheduling import module_groups, servers


@dataclass
class FakeCallSpec:
    params: dict[str, object]


@dataclass
class FakeItem:
    nodeid: str
    fixturenames: tuple[str, ...] = ()
    markers: tuple[str, ...] = field(default=())
    callspec: FakeCallSpec | None = None

    def iter_markers(self) -> Any:
        return [getattr(pytest.mark, name).mark for name in self.markers]


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


def test_backend_parametrized_tests_join_the_group_of_their_server_one_by_one() -> None:
    """One module run against S3 and HDFS (``backend``): its S3 cases are in the S3 group, its
    HDFS cases in the HDFS group, scheduled by id; its other tests stay with their module."""

    def case(name: str, backend: str) -> FakeItem:
        return FakeItem(f"tests/lease.py::{name}[{backend}]", ("backend", "request"),
                        (backend,), FakeCallSpec({"backend": backend}))  # fmt: skip

    items = [
        FakeItem("tests/a.py::t1", ("s3_bucket", "s3_server")),
        FakeItem("tests/h.py::t1", ("hdfs_dir", "hdfs_server")),
        case("t1", "s3"),
        case("t1", "hdfs"),
        case("t2", "s3"),
        FakeItem("tests/lease.py::plain"),
        FakeItem("tests/lease.py::other[x]", ("backend",), (), FakeCallSpec({"backend": "x"})),
    ]
    groups = module_groups(items)  # type: ignore[arg-type]
    assert groups == {
        "tests/a.py": "s3",
        "tests/h.py": "hdfs",
        "tests/lease.py::t1[s3]": "s3",
        "tests/lease.py::t2[s3]": "s3",
        "tests/lease.py::t1[hdfs]": "hdfs",
        "tests/lease.py": "tests/lease.py",  # plain, and a backend that is no server's
    }
    assert servers(items[3]) == {"hdfs_server"}  # type: ignore[arg-type]
    assert servers(items[1]) == {"hdfs_server"} and not servers(items[5])  # type: ignore[arg-type]
