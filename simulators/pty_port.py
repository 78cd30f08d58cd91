"""The pseudo-terminal the scanner simulator serves on (one per plug-in)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tty
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PtyPort", "open_pty", "point_link"]


@dataclass(slots=True)
class PtyPort:
    """One pseudo-terminal the simulator serves on (replaced at every replug)."""

    master: int
    slave: int
    path: str
    read_transport: asyncio.ReadTransport | None = None
    write_transport: asyncio.WriteTransport | None = None
    session: asyncio.Task[None] | None = None

    async def close(self) -> None:
        """Stop the session, close the transports and both descriptors."""
        if self.session is not None:
            self.session.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.session
        if self.read_transport is not None:
            self.read_transport.close()
        if self.write_transport is not None:
            self.write_transport.abort()
        for fd in (self.master, self.slave):
            with contextlib.suppress(OSError):
                os.close(fd)


async def open_pty(
    session: Callable[[asyncio.StreamReader], Coroutine[Any, Any, None]],
) -> PtyPort:
    """Open a raw pty; ``session`` reads what the host writes (a task, started on return).

    The simulator keeps its own slave descriptor open, so the driver can close and reopen
    the path freely.
    """
    master, slave = os.openpty()
    tty.setraw(slave)
    port = PtyPort(master, slave, os.ttyname(slave))
    loop = asyncio.get_running_loop()
    try:
        reader = asyncio.StreamReader()
        port.read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader),
            os.fdopen(os.dup(master), "rb", buffering=0),
        )
        port.write_transport, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(os.dup(master), "wb", buffering=0)
        )
    except BaseException:
        await port.close()
        raise
    port.session = asyncio.create_task(session(reader), name=f"sim-pty {port.path}")
    return port


def point_link(link: Path, target: str) -> None:
    """Point the symbolic link ``link`` at ``target`` atomically."""
    temporary = link.with_name(f".{link.name}.new")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    temporary.symlink_to(target)
    temporary.replace(link)
