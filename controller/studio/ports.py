"""Who holds a TCP port: read from ``/proc`` (Linux), to name it when the studio's is taken.

:func:`listening_inodes` is pure (the text of ``/proc/net/tcp`` or ``tcp6`` in, the socket
inodes listening on a port out; any bytes survive: a line it cannot read is skipped).
:func:`port_holder` finds the process whose file descriptors hold one of those sockets and
says who it is ("pid 4242: python3 -m http.server 8080"), or ``None`` when it cannot tell (not
Linux, another user's process, a container's namespace). No dependency: ``/proc`` only.
"""

from __future__ import annotations

import os
from pathlib import Path

_LISTEN = "0A"
"""``st`` of a listening socket in ``/proc/net/tcp``."""

_CMDLINE_CHARS = 160
"""At most this much of a holder's command line is shown."""


def listening_inodes(table: bytes, port: int) -> set[int]:
    """The inodes of the sockets listening on ``port`` in a ``/proc/net/tcp`` (or tcp6) text.

    Args:
        table: The file's bytes (a header line, then one socket a line).
        port: The local port.

    Returns:
        The inodes (empty when none, or nothing could be read).
    """
    found: set[int] = set()
    for raw in table.splitlines()[1:]:
        fields = raw.decode("ascii", "replace").split()
        if len(fields) < 10 or fields[3] != _LISTEN:
            continue
        _, _, port_hex = fields[1].rpartition(":")
        try:
            local_port = int(port_hex, 16)
            inode = int(fields[9])
        except ValueError:
            continue
        if local_port == port and inode > 0:
            found.add(inode)
    return found


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def port_holder(port: int, *, proc: Path = Path("/proc")) -> str | None:
    """Who listens on TCP ``port``: ``"pid 4242: python3 -m http.server 8080"``, or ``None``.

    Args:
        port: The port.
        proc: The proc file system (a test may point it elsewhere).
    """
    inodes = listening_inodes(_read(proc / "net" / "tcp"), port) | listening_inodes(
        _read(proc / "net" / "tcp6"), port
    )
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    try:
        pids = [entry for entry in os.listdir(proc) if entry.isdigit()]
    except OSError:
        return None
    for pid in pids:
        fds = proc / pid / "fd"
        try:
            names = os.listdir(fds)
        except OSError:
            continue  # gone, or another user's
        for name in names:
            try:
                target = os.readlink(fds / name)
            except OSError:
                continue
            if target in wanted:
                command = _read(proc / pid / "cmdline").replace(b"\0", b" ").strip()
                text = " ".join(command.decode("utf-8", "replace").split())
                text = text[:_CMDLINE_CHARS] or "?"
                return f"pid {pid}: {text}"
    return None


__all__ = ["listening_inodes", "port_holder"]
