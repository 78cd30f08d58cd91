"""A private PostgreSQL cluster on a loopback port, for the archive's tests and benchmarks.

Runs the real server binaries (``/usr/lib/postgresql/<version>/bin``: ``initdb``, ``pg_ctl``)
on a data directory of its own in a temporary folder and a free port, with ``trust``
authentication on loopback only, so nothing depends on (or disturbs) a server someone else
runs. PostgreSQL refuses to run as root: when the tests run as root the cluster is made and run
as the ``postgres`` OS user (``runuser -u postgres --``), its folder chowned to that user.
Test support: not part of the product.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from controller.errors import TablectlError
from tests.support.mosquitto import free_port

MISSING = "needs the PostgreSQL server binaries (apt-get install postgresql; `make test` does)"
"""The reason of a test skipped for want of PostgreSQL."""


class PostgresError(TablectlError):
    """The PostgreSQL cluster cannot be found, made, started or stopped."""


def find_postgres_bin() -> Path:
    """The folder holding ``initdb`` and ``pg_ctl`` (``POSTGRES_BIN`` first, newest version).

    Raises:
        PostgresError: Not installed (``apt-get install postgresql``).
    """
    override = os.environ.get("POSTGRES_BIN")
    candidates = [override] if override else []
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True
    )
    for candidate in candidates:
        folder = Path(candidate)
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    raise PostgresError("PostgreSQL server binaries not found (apt-get install postgresql)")


def have_postgres() -> bool:
    """Whether the server binaries are installed."""
    try:
        find_postgres_bin()
    except PostgresError:
        return False
    return True


class PostgresCluster:
    """A PostgreSQL cluster of its own: ``initdb`` in a temporary folder, a free loopback port.

    Attributes:
        port: The TCP port (127.0.0.1 only).
        base: The cluster's folder (data directory, socket directory, log).
    """

    def __init__(self) -> None:
        self.bin = find_postgres_bin()
        self.port = free_port()
        self.base = Path(tempfile.mkdtemp(prefix="tablectl-pg-"))
        self.data = self.base / "data"
        self.log = self.base / "server.log"
        self._as_root = os.geteuid() == 0
        if self._as_root:
            user = pwd.getpwnam("postgres")
            os.chown(self.base, user.pw_uid, user.pw_gid)

    def _run(self, *args: str, timeout: float = 60.0) -> None:
        command = list(args)
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise PostgresError(
                f"{Path(args[0]).name} failed (exit {done.returncode}): "
                f"{done.stderr.strip() or done.stdout.strip()}\n{log[-2000:]}",
                command=" ".join(args),
            )

    def start(self) -> None:
        """``initdb`` (once) and start the server; returns when it accepts connections."""
        if not self.data.exists():
            self._run(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.base} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        """Stop the server (fast shutdown); nothing if it is not running."""
        with contextlib.suppress(PostgresError, subprocess.TimeoutExpired):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop")

    def url(self, database: str = "postgres") -> str:
        """A connection URL for ``database`` as the ``postgres`` superuser."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "test") -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # name is ours: hex only
        return self.url(name)

    def close(self) -> None:
        """Stop the server and remove its folder."""
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PostgresCluster:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
