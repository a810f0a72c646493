"""``Lake`` of the S3 suites (``test_s3_ingest_cli.py``, ``test_s3_epochs_cli.py`` import it from
here): the CLI run against ``s3://<bucket>/lake/wh`` with nothing but AWS_* and the warehouse. The
table commands' tests on S3 are ``test_remote_tables_cli.py``'s ``[s3]`` cases."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.remote_lake import RemoteLake


class Lake(RemoteLake):
    def __init__(self, bucket: str, env: dict[str, str], cwd: Path) -> None:
        super().__init__(f"s3://{bucket}", cwd, warehouse="lake/wh", aws=env)
