"""A warehouse on the S3 server or HDFS of the tests, and the CLI run against it with nothing but
``LOGSTORE_WAREHOUSE`` set (and, on S3, the standard AWS variables): what the remote suites share
(``test_remote_tables_cli.py``, the S3 and HDFS ingest suites through ``test_s3_tables_cli`` and
``test_hdfs_tables_cli``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from logstore_cli.storage.s3 import S3Settings, make_client


class RemoteLake:
    """The CLI run against ``<root>/<warehouse>`` (``root``: ``s3://<bucket>`` with the server's
    ``aws`` variables, or an ``hdfs://`` directory of the ``namenode``); what lies below the root,
    relative to it."""

    def __init__(
        self,
        root: str,
        cwd: Path,
        *,
        warehouse: str = "",
        aws: dict[str, str] | None = None,
        namenode: str | None = None,
    ) -> None:
        self.backend = "s3" if root.startswith("s3://") else "hdfs"
        self.cwd = cwd
        self.uri = f"{root}/{warehouse}" if warehouse else root
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LOGSTORE_", "AWS_"))}
        self.env |= {"LOGSTORE_WAREHOUSE": self.uri, "LOGSTORE_STATE_DIR": str(cwd / "state")}
        self.secret: str | None = None
        self.client: Any
        if self.backend == "s3":
            assert aws is not None, "an S3 lake needs the server's AWS_* variables"
            self.env |= aws
            self.secret = aws["AWS_SECRET_ACCESS_KEY"]
            self.bucket = root.removeprefix("s3://")
            self.client = make_client(S3Settings.from_env(aws))
        else:
            from hdfs_native import Client

            assert namenode is not None, "an HDFS lake needs its NameNode's URI"
            self.client = Client(namenode)
            self.path = root.removeprefix(namenode)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "logstore_cli", *args], cwd=self.cwd, env=self.env,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if self.secret is not None:
            assert self.secret not in done.stdout + done.stderr  # never shown, whatever happens
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def ok(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def files(self) -> set[str]:
        """Every object or file below the root, relative to it."""
        if self.backend == "s3":
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
            return {str(o["Key"]) for page in pages for o in page.get("Contents", ())}
        try:
            found = self.client.list_status(self.path, True)
            return {s.path.removeprefix(self.path + "/") for s in found if not s.isdir}
        except FileNotFoundError:
            return set()

    objects = files  # the S3 suites' word

    def put(self, relative: str, data: bytes = b"not logstore's") -> None:
        if self.backend == "s3":
            self.client.put_object(Bucket=self.bucket, Key=relative, Body=data)
            return
        from hdfs_native import WriteOptions

        with self.client.create(f"{self.path}/{relative}", WriteOptions(create_parent=True)) as f:
            f.write(data)

    def upload(self, local: Path, relative: str) -> int:
        """Every file of the local directory ``local`` to ``relative`` below the root."""
        files = [p for p in sorted(local.rglob("*")) if p.is_file()]
        for path in files:
            self.put(f"{relative}/{path.relative_to(local).as_posix()}", path.read_bytes())
        return len(files)
