"""The S3 server's launcher without building or starting it: where the binary is cached, and a
clear error when Go is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.errors import SetupError
from logstore_cli.storage import s3_server


def test_the_binary_is_cached_per_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LOGSTORE_HOME", str(tmp_path))
    assert s3_server.binary_path() == tmp_path / "bin" / "versitygw-v1.8.0"


def test_a_cached_binary_is_used_without_go(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LOGSTORE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    binary = s3_server.binary_path()
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert s3_server.build() == binary


def test_without_go_the_build_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LOGSTORE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SetupError, match="needs Go") as caught:
        s3_server.build()
    assert "install Go" in (caught.value.hint or "")


def test_the_server_info_hides_its_secret() -> None:
    info = s3_server.S3ServerInfo(1, "http://127.0.0.1:1", "us-east-1", "/d", "AK", "s3cr3t")
    assert "s3cr3t" not in repr(info)
    assert info.env()["AWS_ALLOW_HTTP"] == "true"


def test_stop_without_a_server_reports_none(tmp_path: Path) -> None:
    assert s3_server.stop(tmp_path) is False
    assert s3_server.status(tmp_path) is None
