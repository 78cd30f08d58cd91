"""The studio's web app (Starlette): the pages, their WebSockets, the static files.

Routes (docs/studio.md):

| route | what |
|---|---|
| ``/`` | the tables of the studio, with links to their pages |
| ``/tables/{id}/dealer`` | the dealer screen (public feed) |
| ``/tables/{id}/overlay`` | the stream overlay (public; ``?mode=secure-delay``: delayed secure) |
| ``/ws/tables/{id}/public`` | the public feed of a table: the state, then each update |
| ``/ws/tables/{id}/secure-delay`` | the secure-delay feed (only when ``[secure]`` is configured) |
| ``/healthz`` | the feeds' state, as JSON |
| ``/static/...`` | the pages' scripts and styles (package data) |
| ``/pit`` | the pit-boss console, when ``[pit]`` is configured (``controller.studio.pit``) |

A page's socket gets a ``state`` message first (the view as the studio holds it, from the
retained round snapshot and what followed), then one per change, each the full view. The
public socket is fed by the public floor only; the secure-delay socket by the secure-delay
floor, whose messages were held back by the delay (:class:`controller.studio.feed.DelayLine`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import html
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from controller.studio.config import StudioSettings
from controller.studio.feed import Floor, Mailbox

log = structlog.get_logger("studio")

STATIC = Path(str(resources.files("controller.studio") / "static"))
"""The pages, scripts and styles (package data)."""

SECURE_MODE = "secure-delay"


@dataclass
class Floors:
    """The floors the app serves.

    Attributes:
        public: Fed by the studio's own (public) connection: dealer screens, public overlays.
        secure: Fed by the secure role's connection through the delay (``None``: not
            configured).
        stopping: Set when the service stops: every socket closes.
    """

    public: Floor
    secure: Floor | None
    stopping: asyncio.Event


def _page(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def build_studio_app(
    settings: StudioSettings,
    floors: Floors,
    *,
    extra_routes: list[BaseRoute] | None = None,
) -> Starlette:
    """The studio's ASGI app.

    Args:
        settings: The studio config.
        floors: The floors to serve.
        extra_routes: More routes (the integrator's ``/pit`` mount, see below).
    """
    pages = _Pages(settings, floors)
    routes: list[BaseRoute] = [
        Route("/", pages.index),
        Route("/healthz", pages.health),
        Route("/tables/{table}/dealer", pages.dealer),
        Route("/tables/{table}/overlay", pages.overlay),
        WebSocketRoute("/ws/tables/{table}/public", pages.public_socket),
        WebSocketRoute(f"/ws/tables/{{table}}/{SECURE_MODE}", pages.secure_socket),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    # The pit-boss console's /pit mount comes in ``extra_routes`` (``run_studio``).
    routes.extend(extra_routes or [])
    return Starlette(routes=routes)


class _Pages:
    """The app's handlers: pages, health, the two kinds of sockets."""

    def __init__(self, settings: StudioSettings, floors: Floors) -> None:
        self.settings = settings
        self.floors = floors

    def _table(self, request: Request | WebSocket) -> str | None:
        table = str(request.path_params["table"])
        return table if self.settings.shows(table) else None

    async def index(self, request: Request) -> Response:
        """The studio's tables, with links to their pages."""
        tables = sorted(set(self.floors.public.views) | set(self.settings.tables))
        rows = "".join(
            f'<li data-table="{html.escape(t)}">{html.escape(t)}: '
            f'<a href="/tables/{html.escape(t)}/dealer">dealer</a> · '
            f'<a href="/tables/{html.escape(t)}/overlay">overlay</a></li>'
            for t in tables
        )
        body = _page("index.html").replace("<!--TABLES-->", rows or "<li>no table seen yet</li>")
        return HTMLResponse(body)

    async def dealer(self, request: Request) -> Response:
        """The dealer screen."""
        if self._table(request) is None:
            return _unknown_table(request)
        return HTMLResponse(_page("dealer.html"))

    async def overlay(self, request: Request) -> Response:
        """The stream overlay (``?mode=secure-delay``: needs ``[secure]``)."""
        if self._table(request) is None:
            return _unknown_table(request)
        mode = request.query_params.get("mode", "public")
        if mode not in ("public", SECURE_MODE):
            return PlainTextResponse(f"mode {mode!r}: use public or {SECURE_MODE}", status_code=400)
        if mode == SECURE_MODE and self.floors.secure is None:
            return PlainTextResponse(
                "secure-delay mode is not configured on this studio ([secure] in studio.toml)",
                status_code=404,
            )
        return HTMLResponse(_page("overlay.html"))

    async def health(self, request: Request) -> Response:
        """The feeds' state and each table's, as JSON."""
        public, secure = self.floors.public, self.floors.secure
        body: dict[str, Any] = {
            "public": {"feed_up": public.feed_up, "pages": public.pages()},
            "tables": {t: v.online for t, v in sorted(public.views.items())},
        }
        if secure is not None:
            body["secure"] = {"feed_up": secure.feed_up, "pages": secure.pages()}
        return JSONResponse(body)

    async def public_socket(self, websocket: WebSocket) -> None:
        """A page's socket on the public floor."""
        if self._table(websocket) is None:
            await websocket.close(code=4404, reason="not a table of this studio")
            return
        await self._serve(websocket, self.floors.public)

    async def secure_socket(self, websocket: WebSocket) -> None:
        """A secure-delay overlay's socket (the token checked when one is configured)."""
        secure = self.floors.secure
        config = self.settings.secure
        if self._table(websocket) is None or secure is None or config is None:
            await websocket.close(code=4404, reason="no secure-delay feed for this table")
            return
        given = websocket.query_params.get("token", "")
        token = config.token
        if token is not None and not hmac.compare_digest(given, token.get_secret_value()):
            await websocket.close(code=4403, reason="secure-delay needs the overlay token")
            return
        await self._serve(websocket, secure)

    async def _serve(self, websocket: WebSocket, floor: Floor) -> None:
        http = self.settings.http
        await _serve_socket(
            websocket, floor, self.floors.stopping, http.send_timeout_seconds, http.ping_seconds
        )


def _unknown_table(request: Request) -> Response:
    table = request.path_params.get("table")
    return PlainTextResponse(f"table {table!r} is not one of this studio's", status_code=404)


async def _serve_socket(
    websocket: WebSocket,
    floor: Floor,
    stopping: asyncio.Event,
    send_timeout: float,
    ping_seconds: float,
) -> None:
    """Send a page the table's state, then each update, until it goes or the studio stops."""
    table = str(websocket.path_params["table"])
    async with asyncio.timeout(send_timeout):
        await websocket.accept()
    box = floor.follow(table)
    name = f"page-{floor.name}-{table}-{id(box):x}"
    reader = asyncio.create_task(_drain(websocket), name=f"{name}-reader")
    stopper = asyncio.create_task(stopping.wait(), name=f"{name}-stop")
    getter: asyncio.Task[str] | None = None
    try:
        while True:
            getter = asyncio.create_task(_next(box, ping_seconds), name=f"{name}-next")
            done, _ = await asyncio.wait(
                {getter, reader, stopper}, return_when=asyncio.FIRST_COMPLETED
            )
            if getter not in done:
                break
            async with asyncio.timeout(send_timeout):
                await websocket.send_text(getter.result())
    except (WebSocketDisconnect, TimeoutError, RuntimeError, OSError) as exc:
        log.info("page socket closed", table=table, mode=floor.name, reason=type(exc).__name__)
    finally:
        floor.leave(table, box)
        for task in (reader, stopper, getter):
            if task is None:
                continue
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            async with asyncio.timeout(send_timeout):
                await websocket.close(code=1001 if stopping.is_set() else 1000)


PING = '{"type":"ping"}'
"""Sent after ``http.ping_seconds`` without an update (the page ignores it)."""


async def _next(box: Mailbox, ping_seconds: float) -> str:
    """The next update, or a ping after ``ping_seconds`` without one."""
    try:
        async with asyncio.timeout(ping_seconds):
            return await box.get()
    except TimeoutError:
        return PING


async def _drain(websocket: WebSocket) -> None:
    """Read (and ignore) what a page sends, until it disconnects: pages send nothing."""
    while True:
        message = await websocket.receive()
        if message.get("type") == "websocket.disconnect":
            return
