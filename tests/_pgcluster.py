"""A throwaway PostgreSQL cluster for the tests: ``initdb`` into a temporary folder, ``postgres`` on a free
loopback port, stopped and deleted at the end.

Found through ``STOPWISE_PG_BIN`` (a folder holding ``initdb`` and ``postgres``), else Debian's
``/usr/lib/postgresql/<version>/bin``, else ``pg_config --bindir``. ``initdb`` refuses to run as root, so as
root the cluster runs as the ``postgres`` user (Debian's package creates it). ``STOPWISE_TEST_POSTGRES_DSN``
points the tests at a server of your own instead (its user must be allowed to create databases).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HOW_TO_ENABLE = (
    "PostgreSQL tests need psycopg (pip install -e '.[test]') and the server binaries (Debian: apt-get install "
    "postgresql; or set STOPWISE_PG_BIN to the folder with initdb and postgres) or STOPWISE_TEST_POSTGRES_DSN "
    "pointing at a server; CI always runs them"
)


def find_binaries() -> Path | None:
    candidates: list[str] = []
    if os.environ.get("STOPWISE_PG_BIN"):
        candidates.append(os.environ["STOPWISE_PG_BIN"])
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True)
    candidates.extend(debian)
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            candidates.append(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip())
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "postgres").exists():
            return Path(c)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    """A PostgreSQL server the tests may create databases on."""

    admin_dsn: str
    """DSN of the maintenance database, for CREATE DATABASE."""
    base: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    folder: Path | None = None
    _created: list[str] = field(default_factory=list)

    def dsn(self, dbname: str) -> str:
        parts = {**self.base, "dbname": dbname}
        return " ".join(f"{k}={v}" for k, v in parts.items())

    def new_database(self, prefix: str = "t") -> str:
        """Create an empty database and return its DSN."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
        self._created.append(name)
        return self.dsn(name)

    @property
    def host_port(self) -> tuple[str, int]:
        return self.base["host"], int(self.base["port"])


@contextlib.contextmanager
def cluster(*, durable: bool = False) -> Iterator[Server | None]:
    """A running server, or None when there is no way to get one (the caller skips with HOW_TO_ENABLE).

    Tests want speed over crash safety of a throwaway cluster (fsync and synchronous commit off); ``durable``
    keeps PostgreSQL's defaults, for benchmarks that measure a flushed commit."""
    external = os.environ.get("STOPWISE_TEST_POSTGRES_DSN")
    if external:
        from psycopg.conninfo import conninfo_to_dict

        info = {k: str(v) for k, v in conninfo_to_dict(external).items()}
        info.setdefault("host", "localhost")
        info.setdefault("port", "5432")
        yield Server(external, {k: v for k, v in info.items() if k != "dbname"})
        return
    bindir = find_binaries()
    if bindir is None:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="stopwise-pg-"))
    as_user: dict[str, object] = {}
    if os.geteuid() == 0:
        # Run the binaries themselves as that user (not through runuser), so signals reach the server.
        user = pwd.getpwnam("postgres")  # Debian's package creates this user
        os.chown(folder, user.pw_uid, user.pw_gid)
        as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "cwd": folder}
    data = folder / "data"
    port = _free_port()
    process = None
    try:
        subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "stopwise",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
            check=True,
            capture_output=True,
            **as_user,  # type: ignore[arg-type]
        )
        log = open(folder / "server.log", "wb")  # noqa: SIM115 - kept open for the server's lifetime
        process = subprocess.Popen(
            [
                str(bindir / "postgres"),
                "-D",
                str(data),
                "-p",
                str(port),
                "-k",
                str(folder),
                "-c",
                "listen_addresses=127.0.0.1",
                *([] if durable else ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]),
                "-c",
                "max_connections=300",
                "-c",
                "shared_buffers=64MB",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            **as_user,  # type: ignore[arg-type]
        )
        base = {"host": "127.0.0.1", "port": str(port), "user": "stopwise"}
        server = Server(" ".join(f"{k}={v}" for k, v in {**base, "dbname": "postgres"}.items()), base, process, folder)
        _wait_ready(server, process, folder / "server.log")
        yield server
    finally:
        if process is not None:
            # Immediate shutdown (no checkpoint): the cluster is deleted next, so there is nothing to keep.
            process.send_signal(signal.SIGQUIT)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _wait_ready(server: Server, process: subprocess.Popen[bytes], log: Path) -> None:
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"postgres exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            psycopg.connect(server.admin_dsn, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
