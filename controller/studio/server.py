"""The studio service: its feeds and its web server, as named tasks in one TaskGroup.

:func:`run_studio` is what ``tablectl studio`` runs, and what ``tablectl run --simulate``
runs beside the simulated table (a companion task in the table's TaskGroup).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import structlog
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount

from controller.studio.config import StudioSettings
from controller.studio.errors import StudioError
from controller.studio.feed import DelayLine, Feed, Floor
from controller.studio.web import Floors, build_studio_app

log = structlog.get_logger("studio")


@dataclass(frozen=True, slots=True)
class StudioAddress:
    """Where a running studio answers.

    Attributes:
        host: The address bound.
        port: The port bound (the real one when 0 was asked).
    """

    host: str
    port: int

    @property
    def url(self) -> str:
        """``http://host:port`` (a wildcard address shown as 127.0.0.1)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.port}"

    def pages(self, table: str) -> list[str]:
        """The URLs of a table's pages."""
        return [f"{self.url}/tables/{table}/dealer", f"{self.url}/tables/{table}/overlay"]


def bind(host: str, port: int, *, fallback_to_free: bool = False) -> socket.socket:
    """A listening TCP socket on ``host:port`` (any free port after ``EADDRINUSE`` if asked).

    Raises:
        StudioError: The address cannot be bound (in use, not ours), naming it.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        try:
            sock.bind((host, port))
        except OSError as exc:
            if not (fallback_to_free and exc.errno == errno.EADDRINUSE):
                raise
            sock.bind((host, 0))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        held = ""
        if exc.errno == errno.EADDRINUSE:
            from controller.studio.ports import port_holder

            holder = port_holder(port)
            held = f" (held by {holder})" if holder else ""
            held += "; --studio-port 0 (or http.port = 0) picks a free port"
        raise StudioError(
            f"the studio cannot listen on {host}:{port}: {exc.strerror or exc}{held}",
            host=host,
            port=port,
        ) from exc
    sock.setblocking(False)
    return sock


IDLE_TICK_SECONDS = 10.0
"""How often the studio's web server wakes with no connection open (1 s with one)."""


class _Server:
    """uvicorn's server without its signal handlers: the process owner handles signals."""

    def __init__(self, app: object, settings: StudioSettings) -> None:
        import uvicorn

        class Quiet(uvicorn.Server):
            woken: asyncio.Event | None = None

            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield

            async def main_loop(self) -> None:
                # uvicorn's loop wakes ten times a second to see whether it should exit (and
                # once a second refreshes the Date header): the studio's largest share of
                # wake-ups beside a table (docs/performance.md, "The demo"). Here it wakes
                # once a second for the header, and at once when asked to exit (`wake`).
                # With no connection open there is no response to date: it then wakes every
                # IDLE_TICK_SECONDS only (a first response after a quiet spell may carry a
                # Date up to that old).
                self.woken = asyncio.Event()
                counter = 0
                while not await self.on_tick(counter):
                    counter = (counter + 10) % 864000  # one second of uvicorn's ticks
                    tick = 1.0 if self.server_state.connections else IDLE_TICK_SECONDS
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(tick):
                            await self.woken.wait()

            def wake(self) -> None:
                if self.woken is not None:
                    self.woken.set()

        config = uvicorn.Config(
            app,  # type: ignore[arg-type]
            log_config=None,
            access_log=False,
            lifespan="off",
            ws="websockets-sansio",
            proxy_headers=False,  # no X-Forwarded-For from loopback: the pit trusts its proxies
            ws_ping_interval=settings.http.ping_seconds,
            ws_ping_timeout=settings.http.ping_seconds,
            timeout_graceful_shutdown=2,
        )
        self.server = Quiet(config)

    async def serve(self, sock: socket.socket, stop: asyncio.Event) -> None:
        async def stopper() -> None:
            await stop.wait()
            self.server.should_exit = True
            self.server.wake()

        watcher = asyncio.create_task(stopper(), name="studio-http-stop")
        try:
            await self.server.serve(sockets=[sock])
        finally:
            watcher.cancel()


async def run_studio(
    settings: StudioSettings,
    stop: asyncio.Event,
    *,
    on_ready: Callable[[StudioAddress], None] | None = None,
    fallback_to_free_port: bool = False,
    extra_routes: list[BaseRoute] | None = None,
) -> None:
    """Run the studio until ``stop`` is set: feeds, delay line and web server in a TaskGroup.

    Args:
        settings: The studio config.
        stop: Ends the service (pages are closed, connections closed cleanly).
        on_ready: Called with the address once the server listens.
        fallback_to_free_port: A port in use falls back to any free one (``tablectl run``).
        extra_routes: More routes for the app (the ``/pit`` mount).

    Raises:
        StudioError: The port cannot be bound.
        ConfigError: A TLS file of the broker settings cannot be used; a secure-delay feed
            without ``secure.token`` on a studio that does not listen on loopback only.
    """
    settings.check_exposure()
    prefix = settings.mqtt.topic_prefix
    public = Floor(prefix, settings.shows, name="public")
    secure_floor: Floor | None = None
    delay: DelayLine | None = None
    routes = list(extra_routes or [])
    pit_app = _pit_app(settings)
    if pit_app is not None:
        routes.append(Mount("/pit", app=pit_app, name="pit"))
    # One link, its messages handed to every reader that may read them (docs/studio.md).
    sinks: list[Callable[..., None]] = [public.handle]
    links: list[Callable[[bool], None]] = [public.set_feed]
    feeds: list[Feed] = []
    if pit_app is not None and settings.pit_shares_feed():
        console = pit_app.state.pit_console
        console.share_feed()
        sinks.append(console.take_floor)
    secure_mqtt = settings.secure_mqtt
    shared_secure = False
    if settings.secure is not None and secure_mqtt is not None:
        secure_floor = Floor(prefix, settings.shows, secure=True, name="secure-delay")
        delay = DelayLine(
            settings.secure.delay_seconds,
            secure_floor.handle,
            prefix=prefix,
            batch_seconds=DELAY_BATCH_SECONDS,
            watched=secure_floor.watched,
        )
        secure_floor.before_follow = delay.catch_up
        shared_secure = secure_mqtt.same_link(settings.mqtt)
        if shared_secure:  # the secure role's rights are the public one's: one connection
            sinks.append(delay.hold)
            links.append(secure_floor.set_feed)
        else:
            feeds.append(
                Feed(
                    secure_mqtt,
                    delay.hold,
                    on_link=secure_floor.set_feed,
                    secure=True,
                    tables=settings.tables,
                    name="studio-secure-feed",
                )
            )
    feeds.insert(
        0,
        Feed(
            settings.mqtt,
            _each(sinks),
            on_link=_each(links),
            secure=shared_secure,
            tables=settings.tables,
        ),
    )
    floors = Floors(public=public, secure=secure_floor, stopping=stop)
    app = build_studio_app(settings, floors, extra_routes=routes)
    sock = bind(settings.http.host, settings.http.port, fallback_to_free=fallback_to_free_port)
    host, port = sock.getsockname()[:2]
    address = StudioAddress(str(host), int(port))
    server = _Server(app, settings)
    try:
        async with _pit_running(pit_app), asyncio.TaskGroup() as group:
            for feed in feeds:
                group.create_task(feed.run(stop), name=feed.connector.name)
            delay_task = (
                group.create_task(delay.run(), name="studio-secure-delay")
                if delay is not None
                else None
            )
            group.create_task(server.serve(sock, stop), name="studio-http")
            log.info("studio listening", url=address.url, tables=settings.tables or "all seen")
            if on_ready is not None:
                on_ready(address)
            await stop.wait()
            if delay_task is not None:
                delay_task.cancel()
    finally:
        sock.close()


DELAY_BATCH_SECONDS = 0.05
"""How late the secure-delay line may hand a message on so that a burst goes on together."""


def _each(calls: list[Callable[..., None]]) -> Callable[..., None]:
    """One call that makes each of ``calls`` in turn (the only one when there is one)."""
    if len(calls) == 1:
        return calls[0]

    def each(*args: Any) -> None:
        for call in calls:
            call(*args)

    return each


def _pit_app(settings: StudioSettings) -> Starlette | None:
    """The pit-boss console's app when ``[pit]`` is configured (mounted at ``/pit``)."""
    if settings.pit is None:
        return None
    from controller.studio.pit.app import build_pit_app

    return build_pit_app(settings.pit)


@contextlib.asynccontextmanager
async def _pit_running(pit_app: Starlette | None) -> AsyncIterator[None]:
    """Run the mounted console's broker connection (a mounted app's lifespan is not run)."""
    if pit_app is None:
        yield
        return
    async with pit_app.state.pit_lifespan(pit_app):
        yield
