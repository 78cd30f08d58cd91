"""The pit console as a Starlette application, to mount at ``/pit`` (:func:`build_pit_app`).

Routes (relative to where it is mounted):

=============  ======  ==================================================================
path           method  what
=============  ======  ==================================================================
``/``          GET     the floor page (signed in), else a redirect to ``login``
``/today``     GET     the day's results against the par sheet (``?day=YYYY-MM-DD``, UTC;
                       signed in; from the archive: :mod:`.today`)
``/login``     GET     the sign-in form
``/login``     POST    sign in (form: ``username``, ``password``, ``csrf``)
``/logout``    POST    sign out (form: ``csrf``)
``/ws``        WS      the floor pushed to the page; pit actions and recalls from it
``/pit.js``    GET     the page's script
``/pit.css``   GET     its style
``/static/``   GET     the studio's shared page files (``studio.js``: the card drawing the
                       recall view imports; ``studio.css``)
=============  ======  ==================================================================

Sessions are a signed cookie (Starlette's ``SessionMiddleware``: itsdangerous, the configured
``session_secret``), ``SameSite=Strict``, ``HttpOnly``, ``Secure`` with ``https_only``, naming
a session id; signing out revokes that id on the server (every route and the WebSocket refuse
it, and its open WebSockets are closed). Every form carries the session's token (``csrf``) and
every action on the WebSocket too; the WebSocket also checks that the page's ``Origin`` is
this server, and at most ``sockets.per_address`` / ``sockets.total`` are open. Sign-ins are
counted per client address before the password is checked (:mod:`.login`); the client's
address is read from forwarded headers only when the peer is a configured trusted proxy.
Pages get a strict Content Security Policy (scripts and styles from this server only).

Starlette does not run a mounted application's lifespan: the studio that mounts this app runs
``app.state.pit_lifespan(app)`` in its own (see ``docs/studio-pit.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import html
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any
from urllib.parse import parse_qs, urlsplit

import structlog
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from controller.studio.paths import STATIC, CleanPaths
from controller.studio.pit.console import ActionRequest, ConnectorFactory, PitConsole
from controller.studio.pit.errors import RecallError
from controller.studio.pit.login import LoginThrottle, Refused, client_address
from controller.studio.pit.page import SCRIPT, STYLE, floor_page, login_page, today_page
from controller.studio.pit.passwords import hash_password, parse_hash, verify_password
from controller.studio.pit.recall import Recalled, recall_archived, recall_seen
from controller.studio.pit.settings import ACTING_ROLES, PitSettings, PitUser
from controller.studio.pit.words import action_sentence

SESSION_COOKIE = "tablectl_pit"
MAX_FORM_BYTES = 4096
MAX_ROUND_ID = 128
MAX_REVOKED_SESSIONS = 100_000
"""Revoked session ids remembered (each until its cookie would have expired anyway)."""
CLOSE_SIGNED_OUT = 4401
"""WebSocket close code: not signed in, or the session was signed out (the page stops)."""
CLOSE_TOO_MANY = 1013
"""WebSocket close code for a socket over the caps ("try again later": the page retries)."""
SECURITY_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        b"img-src 'self'; form-action 'self'; base-uri 'self'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)

Send_ = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]


class _SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


def _base(connection: HTTPConnection) -> str:
    """The app's own root path, with a trailing slash (``/pit/`` when mounted there)."""
    return str(connection.scope.get("root_path", "")).rstrip("/") + "/"


def _first(form: dict[str, list[str]], name: str) -> str:
    values = form.get(name) or [""]
    return values[0]


def _same(given: Any, expected: Any) -> bool:
    return (
        isinstance(given, str)
        and isinstance(expected, str)
        and bool(expected)
        and hmac.compare_digest(given.encode(), expected.encode())
    )


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _action_request(message: dict[str, Any]) -> ActionRequest:
    def text(name: str) -> str | None:
        value = message.get(name)
        return value if isinstance(value, str) else None

    return ActionRequest(
        table=text("table") or "",
        name=text("name") or "",
        nonce=text("nonce") or "",
        round_id=text("round"),
        reason=text("reason"),
        from_seq=_int_or_none(message.get("from_seq")),
        to_seq=_int_or_none(message.get("to_seq")),
        alert_seq=_int_or_none(message.get("alert_seq")),
        card=text("card"),
        slot=text("slot"),
    )


class PitHandlers:
    """The routes' handlers, sharing the console, the settings and the login throttle.

    Args:
        settings: The console's settings.
        console: The engine (floor, actions).
        throttle: Wrong logins, counted.
    """

    def __init__(self, settings: PitSettings, console: PitConsole, throttle: LoginThrottle) -> None:
        self.settings = settings
        self.console = console
        self.throttle = throttle
        self.log = structlog.get_logger(__name__)
        self.password_checks = 0
        """Passwords checked with scrypt since start (sign-ins the throttle let through)."""
        self._proxies = settings.proxy_networks()
        self._revoked: dict[str, float] = {}  # session id -> when its cookie expires anyway
        self._session_sockets: dict[str, set[asyncio.Event]] = {}
        self._open_sockets: Counter[str] = Counter()
        model = parse_hash(settings.users[0].password_hash)
        # A login for an unknown name costs the same hash as a known one (no name probing).
        self._decoy = hash_password(secrets.token_hex(8), n=model.n, r=model.r, p=model.p)

    # -- life-cycle ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any = None) -> AsyncIterator[None]:
        """Run the console's broker connection (a named task) while the app serves."""
        stop = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            group.create_task(self.console.run(stop), name="pit-console-mqtt")
            try:
                yield
            finally:
                stop.set()

    # -- pages ---------------------------------------------------------------------------------

    def client_of(self, connection: HTTPConnection) -> str:
        """The client's address (from forwarded headers only behind a trusted proxy)."""
        peer = connection.client.host if connection.client else "?"
        return client_address(
            peer, connection.headers.items(), self._proxies, self.settings.proxy_header
        )

    def _is_revoked(self, session_id: str) -> bool:
        expires = self._revoked.get(session_id)
        return expires is not None and expires > time.monotonic()

    def user_of(self, connection: HTTPConnection) -> PitUser | None:
        """The signed-in user (``None``: not signed in, signed out, or no longer configured)."""
        name = connection.session.get("user")
        session_id = connection.session.get("sid")
        if not isinstance(name, str) or not isinstance(session_id, str):
            return None
        if self._is_revoked(session_id):
            return None
        return self.settings.user(name)

    def revoke(self, session_id: str) -> int:
        """Sign a session out on the server.

        Its cookie is refused from now on (until it would have expired anyway), and its open
        WebSockets are closed.

        Args:
            session_id: The session's id (``sid`` in the cookie).

        Returns:
            How many open WebSockets of the session are being closed.
        """
        now = time.monotonic()
        for old in [sid for sid, expires in self._revoked.items() if expires <= now]:
            del self._revoked[old]
        self._revoked[session_id] = now + self.settings.session_max_age_seconds
        while len(self._revoked) > MAX_REVOKED_SESSIONS:
            del self._revoked[next(iter(self._revoked))]
        sockets = self._session_sockets.pop(session_id, set())
        for signed_out in sockets:
            signed_out.set()
        return len(sockets)

    async def floor(self, request: Request) -> Response:
        """The floor page, or a redirect to the sign-in form."""
        user = self.user_of(request)
        base = _base(request)
        if user is None:
            return RedirectResponse(base + "login", status_code=303)
        return HTMLResponse(
            floor_page(
                base=base,
                user=user.name,
                role=user.role,
                csrf=str(request.session.get("csrf", "")),
                archive=self.settings.archive_url is not None,
                deck_check=self.settings.deck_check is not None,
            )
        )

    async def today(self, request: Request) -> Response:
        """Today's results against the par sheet (``?day=YYYY-MM-DD``), or the sign-in."""
        from controller.studio.pit.today import parse_day, today_body

        user = self.user_of(request)
        base = _base(request)
        if user is None:
            return RedirectResponse(base + "login", status_code=303)
        try:
            day = parse_day(request.query_params.get("day"))
        except ValueError as exc:
            return HTMLResponse(
                today_page(base=base, body=f"<p class=error>{html.escape(str(exc))}</p>"),
                status_code=400,
            )
        url = self.settings.archive_url
        tables = self.settings.tables or sorted(self.console.floor.tables)
        body = await today_body(
            url.get_secret_value() if url is not None else None,
            list(tables),
            day,
            self.settings.archive_timeout,
            base=base,
        )
        return HTMLResponse(today_page(base=base, body=body))

    def _login_form(
        self, request: Request, *, error: str | None = None, username: str = "", status: int = 200
    ) -> Response:
        token = secrets.token_urlsafe(24)
        request.session["login_csrf"] = token
        page = login_page(base=_base(request), csrf=token, error=error, username=username)
        return HTMLResponse(page, status_code=status)

    async def login_form(self, request: Request) -> Response:
        """The sign-in form."""
        return self._login_form(request)

    async def _form(self, request: Request) -> dict[str, list[str]] | None:
        length = request.headers.get("content-length")
        if length is None or not length.isdigit() or int(length) > MAX_FORM_BYTES:
            return None
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return None
        return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)

    async def login(self, request: Request) -> Response:
        """Check a sign-in; wrong ones are answered late, and locked after several."""
        form = await self._form(request)
        if form is None:
            return self._login_form(request, error="the sign-in form is too large", status=413)
        username = _first(form, "username").strip()[:64]
        if not _same(_first(form, "csrf"), request.session.get("login_csrf")):
            return self._login_form(
                request,
                error="the sign-in form expired: sign in again",
                username=username,
                status=403,
            )
        client = self.client_of(request)
        # Counted before the (slow) check is awaited: parallel tries cannot pass the limit.
        attempt = self.throttle.begin(client, username)
        if isinstance(attempt, Refused):
            self.log.warning(
                "pit console: sign-in refused unchecked",
                username=username,
                client=client,
                why=attempt.reason,
                wait=round(attempt.wait_seconds, 1),
            )
            return self._login_form(
                request, error=self._refusal(attempt), username=username, status=429
            )
        user = self.settings.user(username)
        stored = user.password_hash if user is not None else self._decoy
        self.password_checks += 1
        right = await asyncio.to_thread(verify_password, _first(form, "password"), stored)
        if user is None or not right:
            self.log.warning("pit console: wrong sign-in", username=username, client=client)
            await asyncio.sleep(self.settings.login.failure_delay_seconds)
            return self._login_form(
                request, error="wrong user name or password", username=username, status=401
            )
        self.throttle.succeeded(attempt)
        previous = request.session.get("sid")
        if isinstance(previous, str):
            self.revoke(previous)  # this browser's earlier session ends with the new one
        request.session.clear()
        request.session.update(
            user=user.name, sid=secrets.token_urlsafe(24), csrf=secrets.token_urlsafe(32)
        )
        self.log.info("pit console: signed in", user=user.name, role=user.role, client=client)
        return RedirectResponse(_base(request), status_code=303)

    @staticmethod
    def _refusal(refused: Refused) -> str:
        wait = f"try again in {int(refused.wait_seconds) + 1} s"
        if refused.reason == "address":
            return f"too many wrong sign-ins from this address: {wait}"
        return (
            f"too many wrong sign-ins for this name from many addresses: {wait}, or sign in "
            "from a terminal that signed in as this user before"
        )

    async def logout(self, request: Request) -> Response:
        """Sign out (the form's token must match the session's): the session is revoked."""
        form = await self._form(request) or {}
        if _same(_first(form, "csrf"), request.session.get("csrf")):
            session_id = request.session.get("sid")
            if isinstance(session_id, str):
                closed = self.revoke(session_id)
                self.log.info(
                    "pit console: signed out",
                    user=request.session.get("user"),
                    client=self.client_of(request),
                    sockets_closed=closed,
                )
            request.session.clear()
        return RedirectResponse(_base(request) + "login", status_code=303)

    async def script(self, _request: Request) -> Response:
        """The page's script."""
        return Response(SCRIPT, media_type="text/javascript")

    async def style(self, _request: Request) -> Response:
        """The page's style."""
        return Response(STYLE, media_type="text/css")

    # -- the WebSocket -------------------------------------------------------------------------

    def _same_origin(self, websocket: WebSocket) -> bool:
        origin = websocket.headers.get("origin")
        if origin is None:
            return True  # not a browser: the session cookie alone decides
        # Host only: behind a TLS proxy the scheme seen here is not the page's.
        parsed = urlsplit(origin)
        return parsed.scheme in ("http", "https") and parsed.netloc == websocket.headers.get(
            "host", ""
        )

    def _over_cap(self, client: str) -> str | None:
        limits = self.settings.sockets
        if self._open_sockets[client] >= limits.per_address:
            return (
                f"too many pit console connections from this address (limit {limits.per_address})"
            )
        if self._open_sockets.total() >= limits.total:
            return f"too many pit console connections in all (limit {limits.total})"
        return None

    async def socket(self, websocket: WebSocket) -> None:
        """Push the floor to a signed-in page; take its actions and recalls."""
        if not self._same_origin(websocket):
            await websocket.close(code=CLOSE_SIGNED_OUT)  # the handshake is refused (403)
            return
        user = self.user_of(websocket)
        session_id = websocket.session.get("sid")
        if user is None or not isinstance(session_id, str):
            # Accepted only to say why: the page stops reconnecting and asks for a sign-in.
            await websocket.accept()
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                await websocket.close(code=CLOSE_SIGNED_OUT, reason="not signed in")
            return
        client = self.client_of(websocket)
        over = self._over_cap(client)
        if over is not None:
            self.log.warning("pit console: socket refused", user=user.name, client=client, why=over)
            await websocket.accept()  # accepted only to say why (a refused handshake says nothing)
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                await websocket.close(code=CLOSE_TOO_MANY, reason=over)
            return
        signed_out = asyncio.Event()
        self._open_sockets[client] += 1
        self._session_sockets.setdefault(session_id, set()).add(signed_out)
        try:
            await websocket.accept()
            await self._serve_socket(websocket, user, signed_out)
        finally:
            self._open_sockets[client] -= 1
            if self._open_sockets[client] <= 0:
                del self._open_sockets[client]
            self._session_sockets.get(session_id, set()).discard(signed_out)
            if not self._session_sockets.get(session_id, True):
                del self._session_sockets[session_id]

    async def _serve_socket(
        self, websocket: WebSocket, user: PitUser, signed_out: asyncio.Event
    ) -> None:
        lock = asyncio.Lock()

        async def send(message: dict[str, Any]) -> None:
            async with lock, asyncio.timeout(self.settings.page_send_timeout):
                await websocket.send_json(message)

        async def close_when_signed_out() -> None:
            await signed_out.wait()
            async with lock, asyncio.timeout(self.settings.page_send_timeout):
                await websocket.close(code=CLOSE_SIGNED_OUT, reason="signed out")

        csrf = websocket.session.get("csrf")
        async with self.console.updates() as queue:
            try:
                async with asyncio.TaskGroup() as group:
                    pusher = group.create_task(self._push(websocket, queue, send), name="pit-push")
                    reader = group.create_task(
                        self._read(websocket, user, csrf, send, group), name="pit-read"
                    )
                    closer = group.create_task(close_when_signed_out(), name="pit-signed-out")
                    await asyncio.wait({reader, closer}, return_when=asyncio.FIRST_COMPLETED)
                    for task in (pusher, reader, closer):
                        task.cancel()
            except* (WebSocketDisconnect, RuntimeError, TimeoutError) as gone:
                # The page went away (or stopped reading) while something was being sent.
                self.log.info(
                    "pit console: page gone", user=user.name, why=repr(gone.exceptions[0])
                )
        if signed_out.is_set():
            self.log.info("pit console: socket of a signed-out session closed", user=user.name)

    async def _push(
        self, websocket: WebSocket, queue: asyncio.Queue[dict[str, Any] | None], send: Send_
    ) -> None:
        while True:
            update = await queue.get()
            if update is None:  # fell behind: the page reconnects and reads everything again
                await websocket.close(code=4000)
                return
            await send(update)

    async def _read(
        self,
        websocket: WebSocket,
        user: PitUser,
        csrf: Any,
        send: Send_,
        group: asyncio.TaskGroup,
    ) -> None:
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                try:
                    message = await websocket.receive_json()
                except WebSocketDisconnect:
                    return
                except ValueError:
                    await send({"type": "error", "text": "a message that is not JSON"})
                    continue
                task = self._dispatch(message, user, csrf, send, group)
                if task is not None:
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
        finally:
            for task in tasks:
                task.cancel()

    def _dispatch(
        self, message: Any, user: PitUser, csrf: Any, send: Send_, group: asyncio.TaskGroup
    ) -> asyncio.Task[None] | None:
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "action":
            request = _action_request(message)
            if not _same(message.get("csrf"), csrf):
                return group.create_task(
                    send(self._answer(request, "invalid", "the page's token is wrong: reload")),
                    name="pit-answer",
                )
            return group.create_task(self._act(user, request, send), name="pit-action")
        if kind == "recall":
            return group.create_task(self._recall(message.get("round"), send), name="pit-recall")
        return group.create_task(
            send({"type": "error", "text": f"unknown message type {kind!r}"}), name="pit-answer"
        )

    @staticmethod
    def _answer(request: ActionRequest, status: str, text: str) -> dict[str, Any]:
        return {
            "type": "answer",
            "table": request.table,
            "name": request.name,
            "nonce": request.nonce,
            "round": request.round_id,
            "alert_seq": request.alert_seq,
            "status": status,
            "text": text,
            "sentence": action_sentence(
                request.name,
                table=request.table,
                round_id=request.round_id,
                status=status,
                reason=text,
            ),
            "command_id": None,
            "repeated": False,
        }

    async def replay_span(self, request: ActionRequest) -> ActionRequest:
        """A replay asked by round, with the round's ``seq`` range (seen, else archived)."""
        if request.name != "replay" or request.from_seq is not None or not request.round_id:
            return request
        span = self.console.round_span(request.table, request.round_id)
        if span is None and self.settings.archive_url is not None:
            with contextlib.suppress(RecallError):
                recalled = await self.recall(request.round_id)
                seqs = [
                    entry["seq"]
                    for entry in recalled.record.get("entries", [])
                    if isinstance(entry.get("seq"), int)
                ]
                span = (min(seqs), max(seqs)) if seqs else None
        if span is None:
            return request  # refused by the console: the range is unknown
        return dataclasses.replace(request, from_seq=span[0], to_seq=span[1])

    async def _act(self, user: PitUser, request: ActionRequest, send: Send_) -> None:
        if user.role not in ACTING_ROLES:
            await send(self._answer(request, "invalid", f"{user.role} may not send pit actions"))
            return
        request = await self.replay_span(request)
        result = await self.console.act(user, request)
        answer = self._answer(request, result.status, result.text)
        answer.update(
            command_id=result.command_id,
            repeated=result.repeated,
            sentence=result.sentence or answer["sentence"],
            from_seq=request.from_seq,
            to_seq=request.to_seq,
        )
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            await send(answer)

    async def _recall(self, round_id: Any, send: Send_) -> None:
        if not isinstance(round_id, str) or not 0 < len(round_id.strip()) <= MAX_ROUND_ID:
            await send({"type": "recall_error", "text": "give a round id (e.g. tp-01-000042)"})
            return
        round_id = round_id.strip()
        try:
            recalled = await self.recall(round_id)
        except RecallError as exc:
            await send({"type": "recall_error", "round": round_id, "text": str(exc)})
            return
        actions = list(self.console.actions.get(round_id, ()))
        await send({"type": "recall", **dataclasses.replace(recalled, actions=actions).to_json()})

    async def recall(self, round_id: str) -> Recalled:
        """A round from the archive, or from what the console saw.

        Raises:
            RecallError: Not found (saying where it looked), or the archive failed.
        """
        url = self.settings.archive_url
        if url is not None:
            return await recall_archived(
                url.get_secret_value(), round_id, timeout=self.settings.archive_timeout
            )
        found = recall_seen(self.console.seen, round_id, self.settings.public_keys)
        if found is None:
            raise RecallError(
                f"round {round_id} was not seen by this console since it started; recall of "
                "any older round needs the studio archive (its address in the pit settings)",
                round_id=round_id,
            )
        return found


def build_pit_app(
    settings: PitSettings,
    *,
    connector_factory: ConnectorFactory | None = None,
    throttle: LoginThrottle | None = None,
) -> Starlette:
    """The pit console, a self-contained Starlette app to mount at ``/pit``.

    Args:
        settings: The console's settings.
        connector_factory: Builds its broker connection (default: a clean-session
            :class:`~controller.mqtt.connection.Connector` with the settings' credential).
        throttle: The wrong-login throttle (tests pass one with their own clock).

    Returns:
        The app. ``app.state.pit_console`` is the engine, ``app.state.pit_lifespan`` the
        context manager that runs its broker connection (run by the app's own lifespan when
        served alone; a studio mounting it must run it in its lifespan).
    """
    console = PitConsole(settings, connector_factory=connector_factory)
    handlers = PitHandlers(settings, console, throttle or LoginThrottle(settings.login))
    app = Starlette(
        routes=[
            Route("/", handlers.floor, methods=["GET"], name="pit-floor"),
            Route("/today", handlers.today, methods=["GET"], name="pit-today"),
            Route("/login", handlers.login_form, methods=["GET"], name="pit-login-form"),
            Route("/login", handlers.login, methods=["POST"], name="pit-login"),
            Route("/logout", handlers.logout, methods=["POST"], name="pit-logout"),
            Route("/pit.js", handlers.script, methods=["GET"], name="pit-script"),
            Route("/pit.css", handlers.style, methods=["GET"], name="pit-style"),
            WebSocketRoute("/ws", handlers.socket, name="pit-ws"),
            Mount("/static", app=StaticFiles(directory=STATIC), name="pit-static"),
        ],
        middleware=[
            Middleware(CleanPaths),
            Middleware(_SecurityHeaders),
            Middleware(
                SessionMiddleware,
                secret_key=settings.session_secret.get_secret_value(),
                session_cookie=SESSION_COOKIE,
                max_age=settings.session_max_age_seconds,
                same_site="strict",
                https_only=settings.https_only,
            ),
        ],
        lifespan=handlers.lifespan,
    )
    app.state.pit_console = console
    app.state.pit_handlers = handlers
    app.state.pit_lifespan = handlers.lifespan
    return app
