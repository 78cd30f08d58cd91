"""The studio's sockets and paths refuse what they must, and a refusal creates nothing.

* The secure-delay socket: the studio's own origin (or an allowed one) only; a page of
  another origin in Chromium reads nothing; without a token, only a loopback ``Host`` (a
  page whose own name was made to resolve to 127.0.0.1 is refused).
* Page sockets are capped per client address and in all; a socket for a table the studio
  neither serves nor heard is refused and no view, ``/healthz`` table or index line appears.
* A path with a control character (``%00``) is a 400 on every route, never a 500.

The app in Starlette's TestClient where no broker is needed; a real studio on a real
Mosquitto, real sockets and Debian's Chromium otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.server
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from websockets.exceptions import InvalidStatus

from controller.studio.config import StudioSettings, studio_settings
from controller.studio.feed import Floor
from controller.studio.web import Floors, build_studio_app
from tests.studio._harness import make_studio_settings, running_studio

TOKEN = "kq4Yc1n0lDk2Hh8v0V5dRr3xw7tLmZ9a"


def app_settings(**extra: Any) -> StudioSettings:
    data: dict[str, Any] = {"tables": ["t1"], "secure": {"delay_seconds": 1.0}, **extra}
    return studio_settings(data, source="test", environ={})


def client_for(settings: StudioSettings) -> TestClient:
    prefix = settings.mqtt.topic_prefix
    floors = Floors(
        public=Floor(prefix, settings.shows, name="public"),
        secure=Floor(prefix, settings.shows, secure=True, name="secure-delay"),
        stopping=asyncio.Event(),
    )
    return TestClient(build_studio_app(settings, floors), base_url="http://127.0.0.1:8080")


def opens(client: TestClient, path: str, headers: dict[str, str]) -> bool:
    """Whether the socket at ``path`` is accepted (and sends the state first)."""
    headers = {"host": "127.0.0.1:8080", **headers}  # the studio's address, as a browser says
    try:
        with client.websocket_connect(path, headers=headers) as socket:
            return bool(socket.receive_json()["type"] == "state")
    except WebSocketDisconnect:
        return False


SECURE = "/ws/tables/t1/secure-delay"


@pytest.mark.parametrize(
    ("headers", "accepted"),
    [
        ({}, True),  # not a browser page (no Origin): the token decides; none on loopback
        ({"origin": "http://127.0.0.1:8080"}, True),  # the studio's own page
        ({"origin": "http://127.0.0.1:8081"}, False),  # a page on another port
        ({"origin": "https://127.0.0.1:8080"}, True),  # behind a TLS proxy, same host
        ({"origin": "null"}, False),  # a sandboxed frame, a file
        ({"origin": "http://[::1"}, False),  # not even a URL
        # DNS rebinding: a page's own name resolved to 127.0.0.1; Host and Origin agree.
        ({"origin": "http://evil.example:8080", "host": "evil.example:8080"}, False),
        ({"origin": "http://localhost:8080", "host": "localhost:8080"}, True),
    ],
)
def test_the_secure_socket_wants_the_studios_own_origin(headers, accepted):
    with client_for(app_settings()) as client:
        assert opens(client, SECURE, headers) is accepted
        assert opens(client, "/ws/tables/t1/public", headers)  # public facts: any page


def test_an_allowed_origin_and_a_token_studio_with_its_own_name():
    secure = {"delay_seconds": 1.0, "token": TOKEN, "allowed_origins": ["https://mixer.tv"]}
    with client_for(app_settings(secure=secure)) as client:
        assert opens(client, f"{SECURE}?token={TOKEN}", {"origin": "https://mixer.tv"})
        assert not opens(client, SECURE, {"origin": "https://mixer.tv"})  # no token
        assert not opens(client, f"{SECURE}?token={TOKEN}", {"origin": "https://evil.tv"})
        assert not opens(client, f"{SECURE}?token=%C3%A9t%C3%A9", {})  # not ASCII: no 500
        # With a token, a studio reached by its own name is its own origin.
        own = {"origin": "http://studio.lan:8080", "host": "studio.lan:8080"}
        assert opens(client, f"{SECURE}?token={TOKEN}", own)


@pytest.mark.parametrize(
    "path",
    [
        "/static/%00",
        "/static/studio.css%00",
        "/static/studio.css%00.png",
        "/static/%01x",
        "/tables/t%00/dealer",
        "/tables/t1/overlay%0a",
        "/%7f",
        "/pit/%00",
    ],
)
def test_a_control_character_in_a_path_is_a_400_not_a_500(path):
    with client_for(app_settings()) as client:
        answer = client.get(path)
        assert answer.status_code == 400, answer.text
        assert "control character" in answer.text and "Traceback" not in answer.text
        with pytest.raises(WebSocketDisconnect), client.websocket_connect("/ws/tables/t%00/pub"):
            pass


def test_other_odd_paths_are_4xx():
    with client_for(app_settings()) as client:
        for path in ("/static/%ff%fe", "/static/..%2f..%2fetc%2fpasswd", "/static/%c0%ae"):
            assert 400 <= client.get(path).status_code < 500, path
        assert client.get("/static/studio.css").status_code == 200


# -- a real studio, real sockets ------------------------------------------------------------


async def _get(url: str) -> tuple[int, str]:
    def fetch() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    return await asyncio.to_thread(fetch)


async def _status(url: str, **options: Any) -> int:
    """101 when the socket opens (and reads its first state), else the handshake's status."""
    try:
        async with websockets.connect(url, open_timeout=5, **options) as socket:
            json.loads(await asyncio.wait_for(socket.recv(), 5))
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


@pytest.mark.hil
async def test_sockets_are_capped_per_client_and_in_all(mosquitto_session):
    settings = make_studio_settings(
        mosquitto_session.url,
        tables=["t1"],
        http={"host": "127.0.0.1", "port": 0, "max_sockets": 3, "max_sockets_per_client": 2},
    )
    async with running_studio(settings) as address:
        ws = address.url.replace("http", "ws") + "/ws/tables/t1/public"
        first = await websockets.connect(ws, open_timeout=5)
        second = await websockets.connect(ws, open_timeout=5)
        try:
            assert await _status(ws) == 403  # a third from 127.0.0.1
            other = await websockets.connect(ws, open_timeout=5, local_addr=("127.0.0.2", 0))
            try:
                # 3 open in all: not even another address gets one more.
                assert await _status(ws, local_addr=("127.0.0.3", 0)) == 403
                health = json.loads((await _get(f"{address.url}/healthz"))[1])
                assert health["sockets"] == {"open": 3, "refused": 2}
            finally:
                await other.close()
        finally:
            await first.close()
        async with asyncio.timeout(5):  # a closed socket gives its place back
            while await _status(ws) != 101:
                await asyncio.sleep(0.05)
        await second.close()


@pytest.mark.hil
async def test_a_socket_for_a_made_up_table_creates_nothing(mosquitto):
    # No table list: the studio shows every table it hears, and only those (a broker of its
    # own: the shared one keeps other tests' retained tables).
    settings = make_studio_settings(mosquitto.url, tables=[])
    async with running_studio(settings) as address:
        ws = address.url.replace("http", "ws")
        for n in range(60):
            assert await _status(f"{ws}/ws/tables/made-up-{n}/public") == 403
        health = json.loads((await _get(f"{address.url}/healthz"))[1])
        assert health["tables"] == {} and health["public"]["pages"] == 0
        _, index = await _get(f"{address.url}/")
        assert "made-up" not in index and "no table seen yet" in index
        # A table heard on the broker gets its view; its socket then opens.
        import aiomqtt

        status = {"schema_version": "3", "journal": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
                  "table": "heard-1", "state": "online", "game": "x",
                  "session": 1, "version": "t", "at": "2026-11-25T10:00:00Z"}  # fmt: skip
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
            await client.publish("tables/heard-1/status", json.dumps(status), qos=1)
        async with asyncio.timeout(5):
            while await _status(f"{ws}/ws/tables/heard-1/public") != 101:
                await asyncio.sleep(0.05)
        health = json.loads((await _get(f"{address.url}/healthz"))[1])
        assert list(health["tables"]) == ["heard-1"]


@contextlib.contextmanager
def other_origin(directory: Path) -> Iterator[str]:
    """A page served by a plain HTTP server on another loopback port: its URL."""
    (directory / "evil.html").write_text("<!doctype html><p>another site</p>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="other-origin", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/evil.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


CROSS_ORIGIN_READ = """
async ([url]) => {
  return await new Promise((resolve) => {
    const got = [];
    const socket = new WebSocket(url);
    let opened = false;
    socket.onopen = () => { opened = true; };
    socket.onmessage = (event) => got.push(String(event.data).slice(0, 200));
    socket.onclose = (event) => resolve({opened, got, code: event.code});
    setTimeout(() => { socket.close(); resolve({opened, got}); }, 3000);
  });
}
"""


@pytest.mark.hil
async def test_a_page_on_another_origin_cannot_read_the_secure_feed(
    mosquitto_session, browser, tmp_path
):
    settings = make_studio_settings(
        mosquitto_session.url, tables=["t1"], secure={"delay_seconds": 1.0}
    )
    async with running_studio(settings) as address:
        secure = address.url.replace("http", "ws") + "/ws/tables/t1/secure-delay"
        page = await browser.new_page()
        # A page of another origin: another port of this machine, a real HTTP server (a
        # page a test fulfils in the browser has no address, and Chromium keeps it off
        # local addresses for that alone: the test would pass for the wrong reason).
        with other_origin(tmp_path) as evil:
            await page.goto(evil)
            read = await page.evaluate(CROSS_ORIGIN_READ, [secure])
        assert read["opened"] is False and "message" not in read["got"], read
        # The studio's own overlay page reads it (same socket, same browser).
        await page.goto(f"{address.url}/tables/t1/overlay?mode=secure-delay")
        read = await page.evaluate(CROSS_ORIGIN_READ, [secure])
        assert read["opened"] and '"mode":"secure-delay"' in read["got"][0], read
