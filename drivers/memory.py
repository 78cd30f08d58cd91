"""An in-memory null modem: ``memory://NAME``, protocol v1 with no port, pty or socket.

python-can's virtual bus and pymodbus's null modem in one idea: a device (the scanner
simulator, :meth:`simulators.scanner.ScannerSimulator.serve_memory`) *serves* a name in this
process, a host (:class:`MemoryCardSource`, opened from ``memory://NAME``) *connects* to it,
and the two ends exchange bytes through :class:`asyncio.StreamReader` buffers. Everything
above the bytes is the real code: :class:`drivers.link.FramedCardSource` frames, acknowledges,
detects gaps and heartbeats exactly as on a serial port. It exists for the fast test tier
(``make test-fast``) and for demos that need no pty; a table computer never uses it.

One host at a time per name, as on a serial cable: a new connection closes the previous one.
The device end can pull the cable (:meth:`MemoryEnd.close`): the host's next read ends
(``ConnectionLost``) and a reopen is refused until the name is served again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator

from drivers.errors import ConnectionLost, TransportError
from drivers.link import FramedCardSource
from drivers.source import DriverSettings, MemorySpec

__all__ = ["MemoryCardSource", "MemoryEnd", "connect", "serve"]

OnConnect = Callable[["MemoryEnd"], Awaitable[None]]
"""The device's side of a new connection: runs until the connection ends."""

_SERVED: dict[str, _Server] = {}


class MemoryEnd:
    """One end of a connected cable: :attr:`reader` has what the other end wrote.

    It is also a :class:`simulators.wire.Link` (``write``, ``is_closing``,
    ``get_write_buffer_size``), so the simulator's device wire writes to it directly.

    Attributes:
        reader: The bytes the other end wrote; at end of file once either end closed.
    """

    def __init__(self) -> None:
        self.reader = asyncio.StreamReader()
        self.peer: MemoryEnd | None = None
        self._closed = False

    def write(self, data: bytes) -> None:
        """Give bytes to the other end (dropped once the cable is down, as on a wire)."""
        peer = self.peer
        if not self._closed and peer is not None and not peer._closed:
            peer.reader.feed_data(bytes(data))

    def is_closing(self) -> bool:
        """Whether this end or the other was closed."""
        return self._closed or self.peer is None or self.peer._closed

    def get_write_buffer_size(self) -> int:
        """Always 0: a write is in the other end's buffer at once."""
        return 0

    def close(self) -> None:
        """Pull the cable: both ends read end of file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.reader.feed_eof()
        peer = self.peer
        if peer is not None and not peer._closed:
            peer._closed = True
            peer.reader.feed_eof()


class _Server:
    """A served name: the device's callback and its current connection."""

    def __init__(self, on_connect: OnConnect) -> None:
        self.on_connect = on_connect
        self.current: MemoryEnd | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    def accept(self) -> MemoryEnd:
        if self.current is not None:
            self.current.close()  # one host at a time
        host, device = MemoryEnd(), MemoryEnd()
        host.peer, device.peer = device, host
        self.current = device
        task = asyncio.get_running_loop().create_task(
            self._session(device), name=f"memory-device {id(device):x}"
        )
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return host

    async def _session(self, device: MemoryEnd) -> None:
        try:
            await self.on_connect(device)
        finally:
            device.close()
            if self.current is device:
                self.current = None

    def stop(self) -> None:
        if self.current is not None:
            self.current.close()
        for task in list(self.tasks):
            task.cancel()


@contextlib.contextmanager
def serve(name: str, on_connect: OnConnect) -> Iterator[None]:
    """Serve ``name`` in this process until the block ends (then every connection closes).

    Raises:
        TransportError: The name is served already.
    """
    if name in _SERVED:
        raise TransportError("a memory device of that name is served already", device=name)
    server = _Server(on_connect)
    _SERVED[name] = server
    try:
        yield
    finally:
        if _SERVED.get(name) is server:
            del _SERVED[name]
        server.stop()


def connect(name: str) -> MemoryEnd:
    """Connect to the device serving ``name``; the host's end of the cable.

    Raises:
        TransportError: Nothing serves that name (a device unplugged, or never there).
    """
    server = _SERVED.get(name)
    if server is None:
        raise TransportError("no memory device serves that name", device=f"memory:{name}")
    return server.accept()


class MemoryCardSource(FramedCardSource):
    """A protocol-v1 scanner on the in-memory null modem (``memory://NAME``).

    Args:
        url: The URL as configured.
        spec: What it resolved to.
        settings: Timeouts and defaults.
    """

    def __init__(self, url: str, spec: MemorySpec, settings: DriverSettings) -> None:
        super().__init__(url, spec.device, settings, "memory")
        self._spec = spec
        self._end: MemoryEnd | None = None

    async def _connect(self) -> None:
        try:
            self._end = connect(self._spec.name)
        except TransportError as exc:
            raise self._error(TransportError, "cannot open the card source", exc.message) from exc

    def _writable(self) -> bool:
        end = self._end
        return self._connected and end is not None and not end.is_closing()

    async def _receive(self) -> bytes:
        assert self._end is not None
        return await self._end.reader.read(4096)  # b"" once the cable is pulled: end of file

    def _transmit_now(self, data: bytes) -> bool:
        if not self._writable():
            return False
        assert self._end is not None
        self._end.write(data)
        return True

    async def _transmit(self, data: bytes) -> None:
        if not self._transmit_now(data):
            raise self._error(ConnectionLost, "writing to the device failed", "unplugged")

    async def _disconnect(self, *, failed: bool) -> None:
        end, self._end = self._end, None
        if end is not None:
            end.close()
