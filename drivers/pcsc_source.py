"""The card-source driver of PC/SC contactless readers (ACS ACR122U, ACR1252U...), latched.

URL (``drivers/pcsc_url.py``)::

    pcsc://?reader=ACS%20ACR122U&codes=FILE[&profile=pcsc-uid][&pcscd=/run/pcscd/pcscd.comm]

The reader is reached as every PC/SC application reaches one: through ``pcscd`` and
libpcsclite, with pyscard's ``smartcard.scard`` (the PC/SC API itself). One task (named
``card-source <url>``) waits on the reader's state with ``SCardGetStatusChange`` (its timeout
is the driver's ``read_timeout``, or the latch's next deadline when that is sooner). Each
PC/SC call runs in a worker thread and every await on one is bounded by the profile's
``response_ms`` (beyond the call's own timeout).

* A card entering the field (``SCARD_STATE_PRESENT``): the driver connects (shared) and sends
  PC/SC part 3's contactless pseudo-APDU ``FF CA 00 00 00`` ("get data: UID"); the UID
  (4, 7 or 10 bytes, then ``90 00``) is a :class:`~drivers.presence.TagSeen` for the latch.
  An answer that is not a UID is tried again (three tries), then ``Misread("device")``.
* The card leaving (``SCARD_STATE_EMPTY``) is a :class:`~drivers.presence.FieldEmpty`. The
  latch (profile ``[presence]``, ``repeats = false``) makes a placement of a card that stayed
  ``place_after_ms`` and a removal of one gone ``remove_after_ms``; a card back within that
  time is the same placement (no removal, no second read). A placement is a
  :class:`~drivers.source.CardRead` of the card the code table maps the UID to; a UID the
  table does not know is ``Misread("unknown_code")`` naming it (a tag of another deck is
  never guessed); a removal is a :class:`~drivers.source.CardRemoved`.
* A tag in the field that does not answer (``SCARD_STATE_MUTE``) is ``Misread("device")``,
  and so is a card that came and went between two states (pcscd counted it, nobody read it).
* pcscd gone (stopped, restarted: ``SCARD_E_NO_SERVICE``...), the reader unplugged
  (``SCARD_STATE_UNAVAILABLE`` / ``UNKNOWN``, ``SCARD_E_UNKNOWN_READER``) or a call that does
  not return in time end the source with :class:`~drivers.errors.ConnectionLost` /
  :class:`~drivers.errors.DeviceTimeout`: the supervisor reconnects (``lost``,
  ``recovered``). The time away is no absence (:meth:`~drivers.presence.PresenceLatch.
  resumed`): a card still on the reader after it is the same placement, and a card placed
  meanwhile is read at the first state after (nothing is lost with the reader).

A PC/SC reader has no display: cues, rescans and refusals reach the dealer through the
table's event feed (counted as ``skipped_commands``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import structlog

from drivers.codec import LedColor
from drivers.errors import ConnectionLost, DeviceTimeout, DriverError, TransportError
from drivers.pcsc_url import PcscSpec
from drivers.presence import FieldEmpty, Placed, PresenceLatch, Removed, TagSeen
from drivers.queued import QueuedReads
from drivers.reader_profile import load_reader_profile
from drivers.source import CardRead, CardRemoved, DriverSettings, Misread, Read

__all__ = [
    "GET_UID",
    "PcscCardSource",
    "PcscUnavailable",
    "list_readers",
    "match_reader",
    "parse_uid_response",
]

GET_UID = (0xFF, 0xCA, 0x00, 0x00, 0x00)
"""PC/SC part 3's contactless "get data" pseudo-APDU for the tag's UID."""

STALL = 0.25
"""Seconds a state may come later than asked before it counts as a stall of this process."""

UID_TRIES = 3
"""Times the UID is asked for before a card in the field counts as a misread."""

_T = TypeVar("_T")


def _in_thread(
    loop: asyncio.AbstractEventLoop, call: Callable[[], _T], what: str
) -> asyncio.Future[_T]:
    """Run one blocking PC/SC call in a daemon thread of its own; the future of its result.

    Not the loop's default executor: a call that never returns (a pcscd that died or wedged
    under it was seen to leave ``SCardGetStatusChange`` waiting for good) would hold the
    executor's shutdown, and with it the table's exit, for ever. A daemon thread holds
    nothing: the call is abandoned once its bound has passed.
    """
    future: asyncio.Future[_T] = loop.create_future()

    def settle(result: _T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result = call()
        except BaseException as exc:  # handed to the waiting coroutine
            outcome: tuple[_T | None, BaseException | None] = (None, exc)
        else:
            outcome = (result, None)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, name=f"pcsc {what}", daemon=True).start()
    return future


_SOCKET_ENV = "PCSCLITE_CSOCK_NAME"
_socket_lock = threading.Lock()
_socket_in_use: str | None = None


class PcscUnavailable(TransportError):
    """pyscard is not installed (``pip install 'tablectl[pcsc]'``)."""


def _scard() -> Any:
    """The PC/SC module of pyscard, imported when a PC/SC reader is first used."""
    try:
        from smartcard import scard
    except ImportError as exc:  # the optional extra is not installed
        raise PcscUnavailable(
            "PC/SC readers need pyscard: pip install 'tablectl[pcsc]'", detail=str(exc)
        ) from exc
    return scard


def _use_socket(path: str | None, url: str) -> None:
    """Point libpcsclite at ``path`` (``pcscd=``) before its first call in this process.

    Raises:
        TransportError: Another pcscd socket is in use in this process (libpcsclite reads
            the variable once).
    """
    global _socket_in_use  # noqa: PLW0603 - libpcsclite's own state is per process
    wanted = path or os.environ.get(_SOCKET_ENV) or "/run/pcscd/pcscd.comm"
    with _socket_lock:
        if _socket_in_use is None:
            if path is not None:
                os.environ[_SOCKET_ENV] = path
            _socket_in_use = wanted
        elif _socket_in_use != wanted:
            raise TransportError(
                "one pcscd per process: this process already uses another pcscd socket",
                url=url,
                detail=f"in use: {_socket_in_use}, asked: {wanted}",
            )


def _code(hresult: int) -> int:
    return hresult & 0xFFFFFFFF


def _message(scard: Any, hresult: int) -> str:
    try:
        return f"{scard.SCardGetErrorMessage(hresult)} (0x{_code(hresult):08X})"
    except Exception:
        return f"0x{_code(hresult):08X}"


def parse_uid_response(response: Sequence[int]) -> str | None:
    """The UID (upper-case hexadecimal) in an answer to ``FF CA 00 00 00``.

    ``None`` if the answer is not one (a status word other than ``90 00``, or not 4, 7 or 10
    bytes). Any sequence of integers is taken; values outside 0-255 make it no UID.
    """
    if len(response) not in (6, 9, 12):
        return None
    if any(not isinstance(byte, int) or not 0 <= byte <= 255 for byte in response):
        return None
    if tuple(response[-2:]) != (0x90, 0x00):
        return None
    return bytes(response[:-2]).hex().upper()


def match_reader(wanted: str, readers: Sequence[str]) -> str | None:
    """The reader ``wanted`` names: its exact name, its first slot, or the one that starts so.

    ``ACS ACR122U`` is ``ACS ACR122U 00 00`` when pcscd has it (pcsc-lite names a reader
    ``FRIENDLYNAME NN SS``, ``SS`` the slot), else the one reader whose name starts with it.

    Returns:
        The reader's full name; ``None`` when none (or more than one) matches.
    """
    for name in (wanted, f"{wanted} 00 00"):
        if name in readers:
            return name
    starting = [name for name in readers if name.startswith(wanted)]
    return starting[0] if len(starting) == 1 else None


def list_readers(pcscd: str | None = None) -> list[str]:
    """The PC/SC readers pcscd knows now (``tablectl devices``); empty when there is none.

    Args:
        pcscd: The pcscd socket (``None``: the system's).

    Raises:
        PcscUnavailable: pyscard is not installed.
        TransportError: pcscd cannot be reached (not running), or another pcscd socket is
            in use in this process.
    """
    scard = _scard()
    _use_socket(pcscd, "pcsc://")
    hresult, context = scard.SCardEstablishContext(scard.SCARD_SCOPE_USER)
    if hresult != scard.SCARD_S_SUCCESS:
        raise TransportError(
            "cannot reach pcscd (is it running?)", device=pcscd, detail=_message(scard, hresult)
        )
    try:
        hresult, readers = scard.SCardListReaders(context, [])
        return list(readers) if hresult == scard.SCARD_S_SUCCESS else []
    finally:
        scard.SCardReleaseContext(context)


class PcscCardSource(QueuedReads):
    """One PC/SC contactless reader, by name, latched.

    Args:
        url: The URL as configured (for logs and errors).
        spec: What the URL resolved to.
        settings: Timeouts (``open_timeout``, ``read_timeout``).
        raw_codes: Read the tags' UIDs as they are, without a code table (enrolment).

    Raises:
        ProfileError: The reader profile or the code table is not valid.
        PcscUnavailable: pyscard is not installed.

    Attributes:
        reader: The reader's full PC/SC name once opened.
        table: The deck's code table (tag UID -> card).
        skipped_commands: Commands a PC/SC reader has no counterpart for (not sent).
        uid_reads: UIDs read from the reader (every presence, before the latch).
        emptied_at: ``time.monotonic()`` when the reader last reported its field empty.
    """

    loses_reads_while_away: ClassVar[bool] = False
    """A card placed while the reader was away is present at the first state after."""

    def __init__(
        self, url: str, spec: PcscSpec, settings: DriverSettings, *, raw_codes: bool = False
    ) -> None:
        super().__init__(url, spec.device)
        self._spec = spec
        self._settings = settings
        loaded = load_reader_profile(spec.profile, spec.codes)
        self.profile = loaded.profile
        self.table = loaded.table
        self._table = None if raw_codes else loaded.table
        self._latch = PresenceLatch(self.profile.presence.times())
        self._scard = _scard()
        self._log = structlog.get_logger(__name__).bind(url=url, device=spec.device)
        self._context: Any = None
        self._task: asyncio.Task[None] | None = None
        self._alive_at: float | None = None
        self._release: Any = None  # a card handle to disconnect
        self._was_open = False
        self._seq = 0
        self.reader: str | None = None
        self.skipped_commands = 0
        self.uid_reads = 0
        self.emptied_at: float | None = None

    @property
    def last_heartbeat_at(self) -> float | None:
        """When pcscd last answered about the reader; ``None`` while closed."""
        return self._alive_at

    # ------------------------------------------------------------------ calls

    async def _call(
        self, what: str, function: Callable[..., _T], *args: Any, extra: float = 0
    ) -> _T:
        """One PC/SC call in a worker thread, bounded by ``response_ms`` (plus ``extra``).

        A call that returned is taken even when this process looks at it late (a stall of its
        event loop longer than the bound is not pcscd's silence).

        Raises:
            DeviceTimeout: The call did not return in time.
        """
        bound = self.profile.response_ms / 1000 + extra
        call = _in_thread(asyncio.get_running_loop(), functools.partial(function, *args), what)
        await asyncio.wait({call}, timeout=bound)
        if call.done():
            return call.result()
        call.cancel()  # the thread finishes on its own (or never: a wedged pcscd); dropped
        raise self._error(
            DeviceTimeout, f"pcscd did not answer {what} within {bound:g} s",
            f"response_ms={self.profile.response_ms:g}",
        )  # fmt: skip

    def _failed(self, what: str, hresult: int) -> DriverError:
        scard = self._scard
        lost = {
            _code(scard.SCARD_E_NO_SERVICE),
            _code(scard.SCARD_E_SERVICE_STOPPED),
            _code(scard.SCARD_E_UNKNOWN_READER),
            _code(scard.SCARD_E_READER_UNAVAILABLE),
            _code(scard.SCARD_E_NO_READERS_AVAILABLE),
            _code(scard.SCARD_E_INVALID_HANDLE),
        }
        kind = ConnectionLost if _code(hresult) in lost else TransportError
        error: DriverError = self._error(kind, f"{what} failed", _message(scard, hresult))
        return error

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Reach pcscd, find the reader by name and start watching it (``open_timeout``).

        Raises:
            TransportError: Already open, pcscd unreachable, or no (single) reader of that
                name: the reader's name and the readers pcscd knows are in the error.
            DeviceTimeout: pcscd did not answer in time.
        """
        if self._task is not None:
            raise self._error(TransportError, "card source is already open")
        scard = self._scard
        _use_socket(self._spec.pcscd, self._url)
        hresult, context = await self._call(
            "SCardEstablishContext", scard.SCardEstablishContext, scard.SCARD_SCOPE_USER,
            extra=self._settings.open_timeout,
        )  # fmt: skip
        if hresult != scard.SCARD_S_SUCCESS:
            raise self._error(
                TransportError, "cannot reach pcscd (is it running?)", _message(scard, hresult)
            )
        try:
            hresult, readers = await self._call(
                "SCardListReaders", scard.SCardListReaders, context, []
            )
            known = list(readers) if hresult == scard.SCARD_S_SUCCESS else []
            reader = match_reader(self._spec.reader, known)
            if reader is None:
                raise self._error(
                    TransportError,
                    "no PC/SC reader of that name (unplugged? tablectl devices lists them)"
                    if not [n for n in known if n.startswith(self._spec.reader)]
                    else "more than one PC/SC reader's name starts so: give the whole name",
                    f"reader={self._spec.reader!r}; readers: {', '.join(known) or 'none'}",
                )
        except BaseException:
            scard.SCardReleaseContext(context)
            raise
        self._context, self.reader = context, reader
        self._alive_at = time.monotonic()
        if self._was_open:
            self._latch.resumed(self._alive_at)
        self._was_open = True
        self._task = asyncio.create_task(
            self._watch(context, reader), name=f"card-source {self._url}"
        )
        self._log.info("card_source_opened", kind="pcsc", reader=reader)

    async def close(self) -> None:
        """Stop watching and release the context; reads not taken stay queued. Never raises."""
        task, context = self._task, self._context
        self._task, self._context, self._alive_at = None, None, None
        scard = self._scard
        if context is not None:
            with contextlib.suppress(Exception):
                scard.SCardCancel(context)  # wakes a waiting SCardGetStatusChange
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.keep_reads()
        if context is not None:
            try:
                await self._call("SCardReleaseContext", scard.SCardReleaseContext, context)
            except Exception as exc:  # never raises
                self._log.debug("card_source_close_error", error=str(exc))
        self._log.info("card_source_closed")

    async def next_read(self) -> Read:
        """The next card, removal, misread, in the order they were decided.

        Raises:
            ConnectionLost: pcscd or the reader went away.
            DeviceTimeout: pcscd stopped answering.
            TransportError: The source is not open.
        """
        return await self.take(is_open=self._task is not None)

    # ------------------------------------------------------------------ watching

    async def _watch(self, context: Any, reader: str) -> None:  # noqa: C901 - one state machine
        scard = self._scard
        current = scard.SCARD_STATE_UNAWARE
        first = True
        try:
            while True:
                now = time.monotonic()
                wait = self._settings.read_timeout
                deadline = self._latch.next_deadline()
                if deadline is not None:
                    wait = min(wait, max(0.0, deadline - now))
                hresult, states = await self._call(
                    "SCardGetStatusChange", scard.SCardGetStatusChange, context,
                    int(wait * 1000), [(reader, current)], extra=wait,
                )  # fmt: skip
                at = time.monotonic()
                if at - now > wait + STALL:
                    # This process (or pcscd) could not look: the time since counts as the
                    # link's outage, not the card's absence (a removal comes later, never
                    # wrongly: a card lifted and back during a stall is no fold).
                    self._latch.resumed(at)
                code = _code(hresult)
                if code == _code(scard.SCARD_E_TIMEOUT):
                    self._alive_at = at
                    self._emit(self._latch.due(at))
                    continue
                if code == _code(scard.SCARD_E_CANCELLED):
                    return
                if hresult != scard.SCARD_S_SUCCESS:
                    raise self._failed("waiting for the reader's state", hresult)
                self._alive_at = at
                _name, event, _atr = states[0]
                if event & (scard.SCARD_STATE_UNKNOWN | scard.SCARD_STATE_UNAVAILABLE):
                    raise self._error(ConnectionLost, "the reader is gone (unplugged?)", reader)
                changed_card = (event >> 16) != (current >> 16) and not first
                was_present = bool(current & scard.SCARD_STATE_PRESENT) and not first
                present = bool(event & scard.SCARD_STATE_PRESENT)
                current = event & ~scard.SCARD_STATE_CHANGED
                if present and (not was_present or changed_card):
                    if was_present:  # removed and placed again between two states
                        self._field_empty(at)
                    await self._card_arrived(context, reader, event, at)
                elif not present and (was_present or first):
                    self._field_empty(at)
                elif not present and changed_card:  # a card came and went between two states
                    self._put(
                        Misread(
                            "device",
                            f"{reader}: a card was on the reader too briefly to be read: put it "
                            "down again",
                            None,
                            at,
                        )
                    )
                first = False
        except DriverError as exc:
            self._log.error("card_source_failed", error=str(exc))
            self._queue.put_nowait(exc)

    def _field_empty(self, at: float) -> None:
        self.emptied_at = at
        self._emit(self._latch.feed(FieldEmpty(None, at)))

    async def _card_arrived(self, context: Any, reader: str, event: int, at: float) -> None:
        scard = self._scard
        if event & scard.SCARD_STATE_MUTE:
            self._put(Misread("device", f"{reader}: a tag in the field does not answer", None, at))
            return
        problem = "no answer"
        for _ in range(UID_TRIES):
            try:
                uid, problem = await self._read_uid(context, reader)
                if uid is not None:
                    self.uid_reads += 1
                    self._emit(self._latch.feed(TagSeen(uid, None, time.monotonic())))
                    return
            finally:
                await self._disconnect()
            if problem == "gone":
                return  # it left before it could be read: its FieldEmpty follows
        self._put(
            Misread(
                "device",
                f"{reader}: the tag's UID did not read ({problem}): lift the card and put it back",
                None,
                time.monotonic(),
            )
        )

    def _exchange(self, context: Any, reader: str) -> tuple[int, int, list[int], Any]:
        """In a worker thread: connect (shared) and send ``FF CA 00 00 00``.

        Returns:
            ``(connect result, transmit result, response, card handle or None)``.
        """
        scard = self._scard
        hresult, card, protocol = scard.SCardConnect(
            context, reader, scard.SCARD_SHARE_SHARED,
            scard.SCARD_PROTOCOL_T0 | scard.SCARD_PROTOCOL_T1,
        )  # fmt: skip
        if hresult != scard.SCARD_S_SUCCESS:
            return hresult, hresult, [], None
        sent, response = scard.SCardTransmit(card, protocol, list(GET_UID))
        return hresult, sent, list(response), card

    async def _read_uid(self, context: Any, reader: str) -> tuple[str | None, str]:
        """``(uid, "")`` or ``(None, why)``; ``why == "gone"`` when the card left.

        The tag is released (``SCardDisconnect``) after its UID went to the latch, so the
        card reaches the table without waiting for it.
        """
        connected, sent, response, card = await self._call(
            "SCardConnect/SCardTransmit", self._exchange, context, reader
        )
        try:
            return self._uid_of(connected, sent, response)
        finally:
            if card is not None:
                self._release = card

    def _uid_of(self, connected: int, sent: int, response: list[int]) -> tuple[str | None, str]:
        scard = self._scard
        gone = {_code(scard.SCARD_W_REMOVED_CARD), _code(scard.SCARD_E_NO_SMARTCARD)}
        if connected != scard.SCARD_S_SUCCESS:
            if _code(connected) in gone:
                return None, "gone"
            if _code(connected) == _code(scard.SCARD_W_UNRESPONSIVE_CARD):
                return None, "the tag does not answer"
            raise self._failed("connecting to the tag", connected)
        if _code(sent) in gone:
            return None, "gone"
        if sent != scard.SCARD_S_SUCCESS:
            return None, _message(scard, sent)
        uid = parse_uid_response(response)
        if uid is None:
            return None, f"answer {bytes(b & 0xFF for b in response).hex().upper() or 'empty'}"
        return uid, ""

    async def _disconnect(self) -> None:
        """Release the tag connected last (``SCardDisconnect``, leaving the card as it is)."""
        card, self._release = self._release, None
        if card is None:
            return
        scard = self._scard
        with contextlib.suppress(DriverError):
            await self._call("SCardDisconnect", scard.SCardDisconnect, card, scard.SCARD_LEAVE_CARD)

    # ------------------------------------------------------------------ reads

    def _put(self, read: Read) -> None:
        self._queue.put_nowait(read)

    def _emit(self, events: list[Placed | Removed]) -> None:
        for event in events:
            read = self._read_of(event)
            if read is not None:
                self._put(read)

    def _read_of(self, event: Placed | Removed) -> Read | None:
        card = event.uid if self._table is None else self._table.card_of(event.uid)
        if isinstance(event, Removed):
            return None if card is None else CardRemoved(card, None, event.at)
        if card is None:
            table = self._table.name if self._table is not None else ""
            return Misread(
                "unknown_code",
                f"{self.reader}: tag {event.uid} is not in the code table {table!r} (a tag of "
                "another deck?): take it away",
                None,
                event.at,
            )
        self._seq += 1
        return CardRead(card, None, self._seq, event.at)

    # ------------------------------------------------------------------ commands

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """A PC/SC reader has no display: the cue reaches the dealer by the event feed."""
        self.skipped_commands += 1

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """As :meth:`expect`."""
        self.skipped_commands += 1

    async def reject(self, slot_name: str, reason: str) -> None:
        """As :meth:`expect`."""
        self.skipped_commands += 1

    async def led(self, color: LedColor, *, blink: bool = False, duration_ms: int = 0) -> None:
        """No LED command is used."""
        self.skipped_commands += 1

    async def beep(self, count: int = 1, duration_ms: int = 100) -> None:
        """No beeper command is used."""
        self.skipped_commands += 1

    async def reset(self) -> None:
        """Nothing to reset: the reader keeps no partial state of ours."""
