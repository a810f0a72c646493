"""A real S3-protocol server on loopback for development and the test-suite: versitygw.

Why versitygw v1.8.0 (Apache-2.0): it implements ``If-None-Match: *`` and ``If-Match`` on
``PutObject`` atomically (8 racing writers: exactly one wins, every trial), starts in under a second
with about 60 MB, and builds from the Go module proxy with the machine's Go. Debian has no usable
S3 server, and a Python mock is not a server.

- ``build()``: ``go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`` once, into
  ``<cache>/bin/versitygw-v1.8.0`` (``LOGSTORE_HOME``, else ``~/.cache/logstore``), like the jars;
  about 5 CPU-minutes the first time, nothing afterwards. Two builds at once wait on one lock.
- ``start(state_dir)``: the server on ``127.0.0.1:<free port>`` with its data in
  ``<state_dir>/data`` (the posix backend: one directory per bucket; it needs user xattrs, as ext4
  has; emptied first unless ``fresh=False``, which the demo uses to keep its buckets between runs),
  fresh random root keys passed in its environment (never on its command line, which ``ps``
  shows), ready when its health endpoint answers (polled with a deadline). ``server.json`` records
  the pid and address; ``s3.env`` (0600) holds the ``AWS_*`` lines a shell can ``source``.
- ``stop(state_dir)``: SIGTERM (SIGKILL after a grace period) to exactly the recorded process.

Run it as ``scripts/s3-server.sh build|start|stop|status`` or ``python -m
logstore_cli.storage.s3_server``.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from logstore_cli import processes
from logstore_cli.errors import LogstoreError, SetupError
from logstore_cli.paths import cache_home, private_dir, state_home

VERSION = "v1.8.0"
MODULE = "github.com/versity/versitygw/cmd/versitygw"
REGION = "us-east-1"
HEALTH_PATH = "/_logstore_health"
BUILD_TIMEOUT_S = 1800.0  # the first build compiles the AWS SDK: minutes on two loaded cores
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
_STATE_FILE = "server.json"
_ENV_FILE = "s3.env"
_LOG_FILE = "server.log"


class S3ServerError(LogstoreError):
    """The local S3 server could not be built, started or stopped."""


@dataclass(frozen=True)
class S3ServerInfo:
    pid: int
    endpoint: str  # http://127.0.0.1:<port>
    region: str
    data_dir: str
    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)

    def env(self) -> dict[str, str]:
        """The standard AWS variables that reach this server (boto3, the AWS CLI, delta-rs)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_ALLOW_HTTP": "true",
        }


def binary_path() -> Path:
    return cache_home() / "bin" / f"versitygw-{VERSION}"


def build(*, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """The cached versitygw binary, built with ``go install`` when it is not there yet."""
    target = binary_path()
    if os.access(target, os.X_OK):
        return target
    go = shutil.which("go")
    if go is None:
        raise SetupError(
            "building the S3 test server (versitygw) needs Go, which is not on PATH",
            hint="install Go 1.24 or newer (e.g. 'apt-get install golang-go', or the Go "
            "distribution in /usr/local/go/bin), then run scripts/s3-server.sh build",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(target.parent / ".versitygw.build.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process building it: wait for its result
        if os.access(target, os.X_OK):
            return target
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as gobin:
            env = {**os.environ, "GOBIN": gobin, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
            try:
                done = subprocess.run(
                    [go, "install", f"{MODULE}@{VERSION}"], env=env, capture_output=True,
                    text=True, timeout=timeout_s, check=False,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                raise S3ServerError(
                    f"building versitygw {VERSION} took longer than {timeout_s:.0f} s"
                ) from None
            built = Path(gobin) / "versitygw"
            if done.returncode != 0 or not built.exists():
                raise S3ServerError(
                    f"'go install {MODULE}@{VERSION}' failed (exit {done.returncode})",
                    hint="check that the Go module proxy is reachable and Go is 1.24 or newer",
                    detail=processes.tail(done.stderr or done.stdout or ""),
                )
            os.replace(built, target)
    finally:
        os.close(lock)
    return target


def default_state_dir() -> Path:
    return state_home() / "s3-server"


def _read_state(state_dir: Path) -> S3ServerInfo | None:
    try:
        data = json.loads((state_dir / _STATE_FILE).read_text("utf-8"))
        return S3ServerInfo(**data)
    except (OSError, ValueError, TypeError):
        return None


def status(state_dir: Path) -> S3ServerInfo | None:
    """The running server recorded in ``state_dir``; None when none runs."""
    info = _read_state(state_dir)
    return info if info is not None and processes.alive(info.pid) else None


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _answers(port: int, timeout_s: float) -> bool:
    connection = http.client.HTTPConnection(processes.HOST, port, timeout=timeout_s)
    try:
        connection.request("GET", HEALTH_PATH)
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def start(
    state_dir: Path | None = None, *, fresh: bool = True, timeout_s: float = START_TIMEOUT_S
) -> S3ServerInfo:
    """Start a server with fresh keys and an empty data dir below ``state_dir`` (the buckets of
    the last start kept when not ``fresh``: the root account reaches them with any keys); its
    address."""
    state_dir = private_dir(state_dir or default_state_dir())
    running = status(state_dir)
    if running is not None:
        raise S3ServerError(
            f"an S3 server already runs from {state_dir} (pid {running.pid}, {running.endpoint})",
            hint="stop it first: scripts/s3-server.sh stop",
        )
    binary = build()
    data_dir = state_dir / "data"
    if fresh:
        shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(mode=0o700, exist_ok=not fresh)
    (port,) = processes.free_ports(1)
    access, secret = f"logstore{secrets.token_hex(6)}", secrets.token_urlsafe(24)
    env = {
        **os.environ,
        "ROOT_ACCESS_KEY_ID": access,
        "ROOT_SECRET_ACCESS_KEY": secret,
        "VGW_PORT": f"{processes.HOST}:{port}",
        "VGW_REGION": REGION,
        "VGW_HEALTH": HEALTH_PATH,
        "VGW_QUIET": "true",
    }
    log = state_dir / _LOG_FILE
    began = time.monotonic()
    proc = processes.launch([str(binary), "posix", str(data_dir)], log, env)
    deadline = began + timeout_s
    while not _answers(port, timeout_s=1.0):
        if proc.poll() is not None:
            raise S3ServerError(
                f"the S3 server exited at start (exit {proc.returncode})",
                hint=f"see {log}",
                detail=processes.tail_file(log),
            )
        if time.monotonic() >= deadline:
            processes.kill(proc.pid, S3ServerError)
            raise S3ServerError(
                f"the S3 server did not answer within {timeout_s:.0f} s",
                hint=f"see {log}",
                detail=processes.tail_file(log),
            )
        time.sleep(0.05)  # poll interval of a condition with a deadline
    info = S3ServerInfo(
        pid=proc.pid, endpoint=f"http://{processes.HOST}:{port}", region=REGION,
        data_dir=str(data_dir), access_key_id=access, secret_access_key=secret,
    )  # fmt: skip
    _write_private(state_dir / _STATE_FILE, json.dumps(asdict(info)))
    _write_private(
        state_dir / _ENV_FILE, "".join(f"export {k}={v}\n" for k, v in info.env().items())
    )
    return info


def stop(state_dir: Path | None = None, *, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the server recorded in ``state_dir``; False when none ran."""
    state_dir = state_dir or default_state_dir()
    info = _read_state(state_dir)
    if info is None:
        return False
    ran = processes.alive(info.pid)
    if ran:
        processes.terminate(info.pid, timeout_s=timeout_s, stuck=S3ServerError)
    for name in (_STATE_FILE, _ENV_FILE):
        with contextlib.suppress(FileNotFoundError):
            (state_dir / name).unlink()
    return ran


def main(argv: list[str]) -> int:
    """``build`` | ``start [--keep]`` | ``stop`` | ``status``; keys are never printed (see
    ``s3.env``)."""
    command = argv[0] if argv else ""
    state_dir = default_state_dir()
    try:
        if command == "build":
            if not os.access(binary_path(), os.X_OK):
                print(
                    f"building versitygw {VERSION} with Go (once; a few minutes)", file=sys.stderr
                )
            print(build())
        elif command == "start":
            info = start(state_dir, fresh="--keep" not in argv[1:])
            print(f"S3 server (versitygw {VERSION}) at {info.endpoint}, pid {info.pid}")
            print(f"for its credentials and endpoint: source {state_dir / _ENV_FILE}")
        elif command == "stop":
            print("stopped" if stop(state_dir) else "no S3 server was running")
        elif command == "status":
            found = status(state_dir)
            print(f"running at {found.endpoint}, pid {found.pid}" if found else "not running")
            return 0 if found else 1
        else:
            print("usage: s3-server.sh build|start [--keep]|stop|status", file=sys.stderr)
            return 2
    except LogstoreError as exc:
        print(exc.plain(), file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
