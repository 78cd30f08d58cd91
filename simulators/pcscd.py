"""A private ``pcscd`` with virtual readers: the real PC/SC stack, no hardware, no root.

The Debian ``pcscd`` (pcsc-lite 1.9.9) always listens on ``/run/pcscd/pcscd.comm`` unless
it is *socket-activated*: then it serves the listening socket it is handed, as systemd's
``pcscd.socket`` does. :class:`PrivatePcscd` binds a socket of its own in a folder of its
own, and starts ``pcscd --foreground`` with it as descriptor 3 (``LISTEN_FDS=1``,
``LISTEN_PID`` its own process id: systemd's protocol), with a reader configuration folder
(``--config``) holding one ``vsmartcard-vpcd`` reader per name asked for. A client reaches
it through ``PCSCLITE_CSOCK_NAME`` (libpcsclite reads it once per process): the
``pcsc://`` URL's ``pcscd=`` option.

vpcd keeps its slots' state per slot number, not per reader, so one pcscd serves one vpcd
reader: its two slots are two readers for PC/SC (pcsc-lite names them ``NAME 00 00`` and
``NAME 00 01``), listening on ``base`` and ``base + 1`` (a second vpcd reader in one pcscd
would share the first one's slots: both would see every card).
:class:`simulators.vpcd.VirtualCard` connects there to put a tag on a slot.

Caveat: when it exits, pcscd cleans ``/run/pcscd`` (its pid file) even when socket-activated:
do not run this beside a system ``pcscd`` you rely on (tests and simulations only).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import tempfile
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from simulators.errors import SimulatorConfigError, SimulatorError

__all__ = [
    "PcscdError",
    "PrivatePcscd",
    "VirtualSlot",
    "pcscd_binary",
    "private_pcscd",
    "process_directory",
]

_log = structlog.get_logger(__name__)

VPCD_DRIVER = Path("/usr/lib/pcsc/drivers/serial/libifdvpcd.so")


class PcscdError(SimulatorError):
    """The private pcscd could not be started, or stopped answering."""


def pcscd_binary() -> str | None:
    """The ``pcscd`` program, or ``None`` when it (or the vpcd driver) is not installed."""
    found = shutil.which("pcscd") or (
        "/usr/sbin/pcscd" if Path("/usr/sbin/pcscd").exists() else None
    )
    return found if found is not None and VPCD_DRIVER.exists() else None


def process_directory() -> Path:
    """This process's folder for a private pcscd's socket (one socket path per process)."""
    return Path(tempfile.gettempdir()) / f"tablectl-pcscd-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class VirtualSlot:
    """One virtual reader slot: its PC/SC name and the port a virtual card connects to."""

    name: str
    port: int


def _free_port_pair(count: int) -> int:
    """A base port whose ``2 * count`` ports (one reader's two slots each) are all free."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + 2 * count >= 65535:
            continue
        sockets: list[socket.socket] = []
        try:
            for port in range(base, base + 2 * count):
                held = socket.socket()
                sockets.append(held)
                held.bind(("0.0.0.0", port))
            return base
        except OSError:
            continue
        finally:
            for held in sockets:
                held.close()
    raise PcscdError("no free ports for the virtual readers", readers=count)


@dataclass
class PrivatePcscd:
    """``pcscd`` on a socket of its own with ``vsmartcard-vpcd`` readers.

    Args:
        name: The reader's friendly name (``ACS ACR122U``); its two slots are the readers
            ``NAME 00 00`` and ``NAME 00 01``.
        directory: Where the socket and the configuration go; ``None``: a folder of this
            process's (``$TMPDIR/tablectl-pcscd-PID``), the same at every start, because
            libpcsclite reads the socket's path once per process.
        start_timeout: Seconds ``pcscd`` may take to say it is ready.

    Attributes:
        socket_path: The socket clients reach it on (``pcscd=`` of a ``pcsc://`` URL).
        slots: Every reader slot, by its PC/SC name.
        log: pcscd's last log lines (for a failure's message).
    """

    name: str = "ACS ACR122U"
    directory: Path | None = None
    start_timeout: float = 10.0
    socket_path: Path = field(init=False)
    slots: dict[str, VirtualSlot] = field(init=False, default_factory=dict)
    log: deque[str] = field(init=False, default_factory=lambda: deque(maxlen=200))
    _process: asyncio.subprocess.Process | None = field(init=False, default=None)
    _pump: asyncio.Task[None] | None = field(init=False, default=None)
    _base: int | None = field(init=False, default=None)
    _owned: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        name = self.name
        if not name or not name.isprintable() or '"' in name or len(name) > 40:
            raise SimulatorConfigError(
                "a reader name is 1-40 printable characters without quotes", name=name
            )
        if self.directory is None:
            self.directory = process_directory()
            self._owned = True
        self.socket_path = self.directory / "pcscd.comm"

    def slot(self, name: str) -> VirtualSlot:
        """A slot by its PC/SC name (``"ACS ACR122U 00 00"``) or its reader's (first slot).

        Raises:
            PcscdError: No such slot.
        """
        found = self.slots.get(name) or self.slots.get(f"{name} 00 00")
        if found is None:
            raise PcscdError("no such virtual reader slot", name=name, slots=sorted(self.slots))
        return found

    def _configure(self) -> Path:
        assert self.directory is not None
        if self._base is None:
            self._base = _free_port_pair(1)
        config = self.directory / "reader.conf.d"
        config.mkdir(parents=True, exist_ok=True)
        for old in config.iterdir():
            old.unlink()
        self.slots = {}
        port = self._base
        (config / "vpcd").write_text(
            f'FRIENDLYNAME "{self.name}"\n'
            f"DEVICENAME   /dev/null:0x{port:04X}\n"
            f"LIBPATH      {VPCD_DRIVER}\n"
            f"CHANNELID    0x{port:04X}\n",
            encoding="utf-8",
        )
        for slot in range(2):
            slot_name = f"{self.name} 00 {slot:02d}"
            self.slots[slot_name] = VirtualSlot(slot_name, port + slot)
        return config

    @property
    def running(self) -> bool:
        """Whether the pcscd process runs."""
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        """Start pcscd and wait (bounded) until it says it is ready.

        Raises:
            PcscdError: pcscd or the vpcd driver is missing, or it did not get ready.
        """
        binary = pcscd_binary()
        if binary is None:
            raise PcscdError(
                "pcscd and vsmartcard-vpcd are not installed"
                " (apt-get install pcscd vsmartcard-vpcd; make test does)"
            )
        if self.running:
            raise PcscdError("the private pcscd already runs", socket=str(self.socket_path))
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self._configure()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.socket_path))
            listener.listen(64)
            os.chmod(self.socket_path, 0o666)
            fd = listener.fileno()
            # LISTEN_PID must be pcscd's own pid: the shell's, which exec keeps (bash: the
            # socket's descriptor may have two digits, which dash cannot redirect).
            script = f'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" -f -i -c "$1" 3<&{fd} {fd}<&-'
            self._process = await asyncio.create_subprocess_exec(
                shutil.which("bash") or "/bin/bash", "-c", script, binary, str(config),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                pass_fds=(fd,),
                start_new_session=True,  # a Ctrl-C at the terminal is the table's, not pcscd's
            )  # fmt: skip
        finally:
            listener.close()
        ready = asyncio.get_running_loop().create_future()
        self._pump = asyncio.create_task(self._read_log(ready), name="pcscd-log")
        try:
            async with asyncio.timeout(self.start_timeout):
                await ready
        except (TimeoutError, PcscdError) as exc:
            await self.stop()
            raise PcscdError(
                "the private pcscd did not get ready",
                timeout=self.start_timeout,
                log=" | ".join(list(self.log)[-8:]),
            ) from exc
        _log.info("pcscd_started", socket=str(self.socket_path), readers=sorted(self.slots))

    async def _read_log(self, ready: asyncio.Future[None]) -> None:
        process = self._process
        assert process is not None
        assert process.stdout is not None
        while True:
            line = await process.stdout.readline()
            if not line:
                if not ready.done():
                    ready.set_exception(PcscdError("pcscd ended", status=process.returncode))
                return
            text = line.decode("utf-8", "replace").rstrip()
            self.log.append(text)
            if "daemon ready" in text and not ready.done():
                ready.set_result(None)

    async def stop(self, *, grace: float = 5.0) -> None:
        """Stop pcscd (SIGTERM, then SIGKILL after ``grace`` seconds). Never raises."""
        process, pump = self._process, self._pump
        self._process, self._pump = None, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                async with asyncio.timeout(grace):
                    await process.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if pump is not None:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump

    async def restart(self) -> None:
        """Stop and start again on the same socket and ports (a service restart)."""
        await self.stop()
        await self.start()

    async def close(self) -> None:
        """Stop pcscd and remove its folder if it made one. Never raises."""
        await self.stop()
        if self._owned and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


@asynccontextmanager
async def private_pcscd(name: str = "ACS ACR122U") -> AsyncIterator[PrivatePcscd]:
    """A started :class:`PrivatePcscd` with this reader's two slots, stopped on exit."""
    daemon = PrivatePcscd(name)
    try:
        await daemon.start()
        yield daemon
    finally:
        await daemon.close()
