"""The ingest job wired through the storage seam (issue 19), without a JVM or a server: the table's
location kept apart from the URI Spark gets, the writer id and the schema watch read and written
through a ``Storage``, the lease chosen by the table's backend, ``--checkpoint`` parsed (``s3://``
and ``s3a://`` on an S3 warehouse only). The real thing on the S3 server:
tests/e2e/test_s3_ingest_cli.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from logstore_cli.catalog.delta_log import spark_path
from logstore_cli.catalog.lease import Lease
from logstore_cli.catalog.schema_watch import SchemaChangedError, SchemaWatch
from logstore_cli.catalog.storage_lease import StorageLease
from logstore_cli.cli.ingest import check_checkpoint_on_storage, checkpoint_location
from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.ingest.plan import JobPaths
from logstore_cli.jobs import ingest
from logstore_cli.jobs.ingest import WRITER_FILE, IngestJob, writer_id
from logstore_cli.storage.hdfs import HdfsStorage
from logstore_cli.storage.local import LocalStorage
from logstore_cli.storage.s3 import S3Storage
from tests.deltalog import write_table
from tests.unit.catalog.test_status import DDL, commit

pytestmark = pytest.mark.unit


def _s3_table(client: object = None) -> S3Storage:
    return S3Storage(client, "bucket-1", ("lake", "wh", "shop", "orders"))


def _job(location: Any, checkpoint: str | None = None, storage: Any = None) -> IngestJob:
    paths = JobPaths(spark_path(location), "default", checkpoint)
    return IngestJob(
        table=SimpleNamespace(name="shop.orders"),  # type: ignore[arg-type]
        location=location,
        paths=paths,
        stores=SimpleNamespace(file=True, log=True),  # type: ignore[arg-type]
        source=None,  # type: ignore[arg-type]
        kafka=None,
        checkpoint_storage=storage,
    )


def test_spark_gets_the_s3a_uri_and_logstore_the_storage() -> None:
    table = _s3_table()
    assert spark_path(table) == "s3a://bucket-1/lake/wh/shop/orders"
    assert spark_path(Path("/data/wh/shop/orders")) == "/data/wh/shop/orders"
    assert spark_path(LocalStorage(Path("/data/t"))) == "/data/t"
    default = table.child("_logstore/checkpoints/default")
    job = _job(table, storage=default)
    assert job.table_uri == "s3a://bucket-1/lake/wh/shop/orders"
    assert job.paths.checkpoint == (
        "s3a://bucket-1/lake/wh/shop/orders/_logstore/checkpoints/default"
    )
    assert job.checkpoint is default  # logstore's writer id goes through the seam
    assert ingest._spark_checkpoint(job) == job.paths.checkpoint
    quarantine = job.quarantine
    assert isinstance(quarantine, S3Storage)
    assert quarantine.uri == "s3://bucket-1/lake/wh/shop/orders/_logstore/quarantine/default"


def test_a_local_table_keeps_its_paths(tmp_path: Path) -> None:
    job = _job(tmp_path / "wh" / "shop" / "orders", checkpoint=str(tmp_path / "cp") + "/")
    assert job.checkpoint == tmp_path / "cp"
    assert ingest._spark_checkpoint(job) == str(tmp_path / "cp")  # as before: Path's text
    assert job.quarantine == tmp_path / "wh/shop/orders/_logstore/quarantine/default"


def test_the_writer_id_on_a_storage_is_created_once_and_kept(tmp_path: Path) -> None:
    checkpoint = LocalStorage(tmp_path / "cp")  # the Storage protocol, as S3 implements it
    first = writer_id(checkpoint)
    assert first.startswith("w-") and writer_id(checkpoint) == first
    assert json.loads((tmp_path / "cp" / WRITER_FILE).read_text())["writer"] == first
    # A second start that lost the put-if-absent race takes the id written first.
    racer = LocalStorage(tmp_path / "cp2")
    original = racer.put_if_absent

    def late(key: str, data: bytes) -> str | None:
        original(key, json.dumps({"writer": "w-first"}).encode())
        return original(key, data)

    racer.put_if_absent = late  # type: ignore[method-assign]
    assert writer_id(racer) == "w-first"


def test_a_storage_checkpoint_with_progress_but_no_writer_id_is_refused(tmp_path: Path) -> None:
    checkpoint = LocalStorage(tmp_path / "cp")
    checkpoint.write("offsets/0", b"v1")
    with pytest.raises(InvalidInputError, match="has Spark progress but no writer id"):
        writer_id(checkpoint)
    broken = LocalStorage(tmp_path / "cp2")
    broken.write(WRITER_FILE, b"{not json")
    with pytest.raises(LogstoreError, match=r"writer id file .* is unreadable"):
        writer_id(broken)


def test_the_schema_watch_reads_a_table_on_a_storage(tmp_path: Path) -> None:
    path = write_table(tmp_path / "wh", DDL)
    watch = SchemaWatch(LocalStorage(path), "db.orders", ["id", "name"])
    watch.check()
    schema = {"type": "struct", "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in (("id", "long"), ("name", "string"), ("qty", "integer"))
    ]}  # fmt: skip
    commit(path, {"operation": "ADD COLUMNS"}, {"metaData": {"schemaString": json.dumps(schema)}})
    with pytest.raises(SchemaChangedError, match="gained column"):
        watch.check()


class _NoSuchKey(Exception):
    response = {"Error": {"Code": "NoSuchKey"}}  # noqa: RUF012 - botocore's ClientError shape


def test_the_job_takes_the_conditional_lease_on_s3_and_flock_locally(tmp_path: Path) -> None:
    puts: list[dict[str, object]] = []

    class Client:
        """An empty bucket that accepts the one conditional create of the lease."""

        def get_object(self, **kw: object) -> None:
            raise _NoSuchKey()

        def put_object(self, **kw: object) -> dict[str, str]:
            puts.append(kw)
            return {"ETag": '"v1"'}

    lease = ingest.acquire_lease(_job(_s3_table(Client())))
    assert isinstance(lease, StorageLease)
    assert [(p["Key"], p["IfNoneMatch"]) for p in puts] == [
        ("lake/wh/shop/orders/_logstore/lease.json", "*")
    ]
    table = tmp_path / "t"
    table.mkdir()
    local = ingest.acquire_lease(_job(table))
    assert isinstance(local, Lease) and local.table_dir == table
    local.release()


@pytest.mark.parametrize("given", ["s3://bucket-2/ckpt/orders", "s3a://bucket-2/ckpt/orders/"])
def test_a_checkpoint_on_s3_is_named_s3a_for_spark(given: str) -> None:
    text, uri = checkpoint_location(given, s3_warehouse=True)
    assert text == "s3a://bucket-2/ckpt/orders"
    assert uri is not None and (uri.bucket, uri.segments) == ("bucket-2", ("ckpt", "orders"))
    assert checkpoint_location("/data/cp", s3_warehouse=True) == ("/data/cp", None)
    assert checkpoint_location("file:///data/cp", s3_warehouse=False) == ("/data/cp", None)


@pytest.mark.parametrize(
    ("given", "remote", "problem"),
    [
        (
            "s3a://bucket-2/cp",
            False,
            "is on S3, which is not supported unless the warehouse is too",
        ),
        ("s3://bucket-2", True, "is a bucket's root"),
        ("s3://bucket-2/a/../b", True, "'..'"),
        ("s3://bucket-2/a%2e%2e/b", True, "'%'"),
        ("s3://key:secret@bucket-2/cp", True, "credentials in the URI"),
        ("hdfs://nn:8020/cp", True, "is on HDFS, which is supported with a warehouse on HDFS only"),
        ("gs://b/cp", True, "not supported"),
    ],
)
def test_a_bad_checkpoint_is_input_error(given: str, remote: bool, problem: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        checkpoint_location(given, s3_warehouse=remote)
    assert problem in info.value.message
    assert "secret" not in info.value.message


@pytest.mark.parametrize("given", ["hdfs://nn:8020/ckpt/orders", "hdfs://nn:8020/ckpt/orders/"])
def test_a_checkpoint_on_hdfs_with_an_hdfs_warehouse(given: str) -> None:
    text, uri = checkpoint_location(given, s3_warehouse=False, hdfs_warehouse=True)
    assert text == "hdfs://nn:8020/ckpt/orders"  # as Spark gets it: Hadoop's own hdfs://
    assert uri is not None and (uri.host, uri.segments) == ("nn:8020", ("ckpt", "orders"))
    for bad, problem in [
        ("hdfs://nn:8020/", "is the file system's root"),
        ("hdfs://nn:8020/a/../b", "'..'"),
        ("s3://bucket/cp", "is on S3, which is not supported unless the warehouse is too"),
    ]:
        with pytest.raises(InvalidInputError) as info:
            checkpoint_location(bad, s3_warehouse=False, hdfs_warehouse=True)
        assert problem in info.value.message, bad


class _FakeHdfs:
    """``hdfs_native.Client.list_status`` over a set of file paths (directories implied)."""

    def __init__(self, files: set[str]) -> None:
        self.files = files

    def list_status(self, directory: str) -> list[SimpleNamespace]:
        below = [
            f.removeprefix(directory + "/") for f in self.files if f.startswith(directory + "/")
        ]
        names = {b.split("/", 1)[0]: "/" in b for b in below}
        return [SimpleNamespace(path=f"{directory}/{n}", isdir=d, modification_time=0)
                for n, d in sorted(names.items())]  # fmt: skip


@pytest.mark.parametrize(
    ("checkpoint", "problem"),
    [
        ("wh/cp", "it is below the warehouse hdfs://nn:8020/wh"),
        ("wh/shop/orders/cp", "it is below the warehouse hdfs://nn:8020/wh"),
        ("other/t/cp", "hdfs://nn:8020/other/t holds a _delta_log (a Delta table)"),
        ("other/t/_delta_log/cp", "hdfs://nn:8020/other/t holds a _delta_log (a Delta table)"),
        ("wh/shop/orders/_logstore/checkpoints/x", None),  # the job's own place
        ("ckpt/orders", None),
        ("other/tx/cp", None),  # a sibling of the table, not the table
    ],
)
def test_a_checkpoint_on_hdfs_stays_out_of_tables(checkpoint: str, problem: str | None) -> None:
    client = _FakeHdfs({"/wh/shop/orders/_delta_log/0.json", "/other/t/_delta_log/0.json"})
    table = HdfsStorage(client, "nn:8020", ("wh", "shop", "orders"))
    target = HdfsStorage(client, "nn:8020", tuple(checkpoint.split("/")))
    job = _job(table, checkpoint=target.uri, storage=target)
    if problem is None:
        check_checkpoint_on_storage(job, "own")
        return
    with pytest.raises(InvalidInputError) as info:
        check_checkpoint_on_storage(job, "own")
    assert problem in info.value.message
    assert f"--checkpoint {target.uri} is inside a table's files" in info.value.message
