"""The ingest command's checks of a local source before Spark starts."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from logstore_cli.cli.ingest import non_regular_files


def test_non_regular_files_are_found_where_spark_would_list_them(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "_skipped").mkdir()
    (src / "a.json").write_text("{}\n")
    os.mkfifo(src / "pipe.json")
    os.mkfifo(src / "sub" / "deep.json")
    os.mkfifo(src / "_skipped" / "x.json")  # Spark lists nothing below a name starting with _
    os.mkfifo(src / ".hidden.json")
    (src / "link.json").symlink_to(src / "pipe.json")  # followed, as Spark follows it
    (src / "dangling.json").symlink_to(tmp_path / "gone")
    (src / "loop").symlink_to(src)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(src / "sock.json"))
        found = non_regular_files(src)
    assert found == sorted(
        [src / "link.json", src / "pipe.json", src / "sock.json", src / "sub" / "deep.json"]
    )
    many = tmp_path / "many"
    many.mkdir()
    for i in range(5):
        os.mkfifo(many / f"{i}.json")
    assert len(non_regular_files(many, limit=2)) == 2  # bounded: the first entries listed
