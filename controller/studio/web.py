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

Sockets (docs/studio.md, "Sockets"): one is opened only for a table the studio serves
(``tables``) or has heard on the broker, and within ``http.max_sockets`` in all and
``http.max_sockets_per_client`` per client address; the secure-delay socket also wants the
same origin as the studio's pages (or one of ``secure.allowed_origins``) and the token. A
refused socket is refused at the handshake (HTTP 403) and creates nothing. A path holding a
control character (``%00``...) is answered 400 on every route, before any route sees it.

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
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, urlsplit

import structlog
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
)
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from controller.studio.config import LOGO_TYPES, StudioSettings, is_loopback
from controller.studio.feed import Floor, Mailbox
from controller.studio.paths import STATIC, CleanPaths

log = structlog.get_logger("studio")


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


@dataclass
class SocketCount:
    """The page sockets open, in all and per client address, within their caps.

    Attributes:
        total: The most open at once (``http.max_sockets``).
        per_client: The most open at once from one address (``http.max_sockets_per_client``).
        open: Open sockets by client address.
        refused: Sockets refused for a cap since start.
    """

    total: int
    per_client: int
    open: Counter[str] = field(default_factory=Counter)
    refused: int = 0

    def take(self, client: str) -> str | None:
        """Count a new socket from ``client``; why not (a cap reached), or ``None``."""
        if self.open.total() >= self.total:
            reason = f"the studio has {self.total} page sockets open (http.max_sockets)"
        elif self.open[client] >= self.per_client:
            reason = (
                f"{client} has {self.per_client} page sockets open (http.max_sockets_per_client)"
            )
        else:
            self.open[client] += 1
            return None
        self.refused += 1
        return reason

    def give_back(self, client: str) -> None:
        """A socket of ``client`` closed."""
        self.open[client] -= 1
        if self.open[client] <= 0:
            del self.open[client]


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
        Route("/branding/logo", pages.logo),
        WebSocketRoute("/ws/tables/{table}/public", pages.public_socket),
        WebSocketRoute(f"/ws/tables/{{table}}/{SECURE_MODE}", pages.secure_socket),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    # The pit-boss console's /pit mount comes in ``extra_routes`` (``run_studio``).
    routes.extend(extra_routes or [])
    return Starlette(routes=routes, middleware=[Middleware(CleanPaths)])


class _Pages:
    """The app's handlers: pages, health, the two kinds of sockets."""

    def __init__(self, settings: StudioSettings, floors: Floors) -> None:
        self.settings = settings
        self.floors = floors
        self.sockets = SocketCount(settings.http.max_sockets, settings.http.max_sockets_per_client)
        self._refusals_logged = 0
        # The overlay's branding, as JSON inside a <script type="application/json">: "<" is
        # escaped so no name can close the element.
        self._branding = json.dumps(settings.branding.page_data()).replace("<", "\\u003c")

    async def logo(self, request: Request) -> Response:
        """The branding's logo file (404 when none is configured)."""
        logo = self.settings.branding.logo
        if logo is None or not logo.is_file():
            return PlainTextResponse("no logo configured (branding.logo)", status_code=404)
        return FileResponse(logo, media_type=LOGO_TYPES[logo.suffix.lower()])

    def _table(self, request: Request | WebSocket) -> str | None:
        """The table of a page's path, if it is one of the studio's (listed, or any)."""
        table = str(request.path_params["table"])
        return table if self.settings.shows(table) else None

    def _socket_table(self, websocket: WebSocket) -> str | None:
        """The table of a socket's path if the studio serves it or has heard it."""
        table = str(websocket.path_params["table"])
        if self.settings.tables:
            return table if table in self.settings.tables else None
        secure = self.floors.secure
        if self.floors.public.heard(table) or (secure is not None and secure.heard(table)):
            return table
        return None

    def _origin_problem(self, websocket: WebSocket) -> str | None:
        """Why the secure-delay socket's ``Origin`` is not allowed, or ``None``.

        Allowed: no ``Origin`` (not a browser page), one of ``secure.allowed_origins``, or the
        studio's own origin (the ``Host`` the request was sent to); without a token, the
        ``Host`` must also be a loopback name (a page whose name was made to resolve to
        127.0.0.1, DNS rebinding, has its own name there).
        """
        origin = websocket.headers.get("origin")
        if origin is None:
            return None
        config = self.settings.secure
        allowed = config.allowed_origins if config is not None else []
        if origin.lower() in allowed:
            return None
        host = websocket.headers.get("host", "")
        parts = _split(origin)
        same = (
            parts is not None
            and parts.scheme in ("http", "https")
            and parts.netloc.lower() == host.lower()
        )
        if same and (config is None or config.token is not None or _loopback_host(host)):
            return None
        return f"origin {origin[:100]!r} is not the studio's own nor an allowed one"

    def _refuse_log(self, websocket: WebSocket, reason: str) -> None:
        """Log a refused socket (the first 20, then one in 100: a flood fills no disk)."""
        self._refusals_logged += 1
        if self._refusals_logged <= 20 or self._refusals_logged % 100 == 0:
            client = websocket.client.host if websocket.client else "?"
            log.info(
                "page socket refused",
                reason=reason,
                client=client,
                path=websocket.url.path[:200],
                refused=self._refusals_logged,
            )

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
        return HTMLResponse(_page("overlay.html").replace("<!--BRANDING-->", self._branding))

    async def health(self, request: Request) -> Response:
        """The feeds' state and each table's, as JSON."""
        public, secure = self.floors.public, self.floors.secure
        body: dict[str, Any] = {
            "public": {
                "feed_up": public.feed_up,
                "pages": public.pages(),
                "rejected": dict(public.rejections.counts),
            },
            "tables": {t: v.online for t, v in sorted(public.views.items())},
            "sockets": {"open": self.sockets.open.total(), "refused": self.sockets.refused},
        }
        if secure is not None:
            body["secure"] = {
                "feed_up": secure.feed_up,
                "pages": secure.pages(),
                "rejected": dict(secure.rejections.counts),
            }
        return JSONResponse(body)

    async def public_socket(self, websocket: WebSocket) -> None:
        """A page's socket on the public floor."""
        if self._socket_table(websocket) is None:
            await self._refuse(websocket, 4404, "not a table of this studio")
            return
        await self._serve(websocket, self.floors.public)

    async def secure_socket(self, websocket: WebSocket) -> None:
        """A secure-delay overlay's socket: a known table, the origin, the token."""
        secure = self.floors.secure
        config = self.settings.secure
        if self._socket_table(websocket) is None or secure is None or config is None:
            await self._refuse(websocket, 4404, "no secure-delay feed for this table")
            return
        wrong_origin = self._origin_problem(websocket)
        if wrong_origin is not None:
            await self._refuse(websocket, 4403, wrong_origin)
            return
        given = websocket.query_params.get("token", "")
        token = config.token
        if token is not None and not hmac.compare_digest(
            given.encode(), token.get_secret_value().encode()
        ):
            await self._refuse(websocket, 4403, "secure-delay needs the overlay token")
            return
        await self._serve(websocket, secure)

    async def _refuse(self, websocket: WebSocket, code: int, reason: str) -> None:
        """Refuse a socket at the handshake (HTTP 403), logged (bounded)."""
        self._refuse_log(websocket, reason)
        await websocket.close(code=code, reason=reason[:120])

    async def _serve(self, websocket: WebSocket, floor: Floor) -> None:
        http = self.settings.http
        client = websocket.client.host if websocket.client else "?"
        full = self.sockets.take(client)
        if full is not None:
            await self._refuse(websocket, 1013, full)
            return
        try:
            await _serve_socket(
                websocket, floor, self.floors.stopping, http.send_timeout_seconds, http.ping_seconds
            )
        finally:
            self.sockets.give_back(client)


def _loopback_host(host: str) -> bool:
    """Whether a ``Host`` header (``name[:port]``, ``[::1]:port``) names a loopback host."""
    parts = _split(f"//{host}")
    return parts is not None and is_loopback(parts.hostname or "")


def _split(url: str) -> SplitResult | None:
    """``urlsplit(url)``, or ``None`` for what it cannot split (a broken IPv6 literal)."""
    try:
        return urlsplit(url)
    except ValueError:
        return None


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
