"""The studio's routes refuse plainly: unknown tables, an unconfigured or unauthorised
secure-delay feed, a wrong mode. A real studio on a real Mosquitto, no table needed."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest
import websockets
from websockets.exceptions import InvalidStatus

from tests.studio._harness import make_studio_settings, running_studio

pytestmark = pytest.mark.hil


async def _get(url: str) -> tuple[int, str]:
    def fetch() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    return await asyncio.to_thread(fetch)


async def _refused(url: str) -> int:
    """The HTTP status a refused WebSocket handshake got (closed before it was accepted)."""
    with pytest.raises(InvalidStatus) as caught:
        async with websockets.connect(url):
            pass
    return caught.value.response.status_code


async def test_without_secure_delay_the_overlay_says_so(mosquitto_session):
    settings = make_studio_settings(mosquitto_session.url, tables=["t1"])
    async with running_studio(settings) as address:
        status, text = await _get(f"{address.url}/tables/t1/overlay?mode=secure-delay")
        assert status == 404 and "secure-delay mode is not configured" in text
        status, text = await _get(f"{address.url}/tables/t1/overlay?mode=spy")
        assert status == 400 and "use public or secure-delay" in text
        status, text = await _get(f"{address.url}/tables/t9/dealer")
        assert status == 404 and "'t9' is not one of this studio's" in text
        ws = address.url.replace("http", "ws")
        assert await _refused(f"{ws}/ws/tables/t9/public") == 403
        assert await _refused(f"{ws}/ws/tables/t1/secure-delay") == 403
        status, text = await _get(f"{address.url}/healthz")
        health = json.loads(text)
        assert status == 200 and "secure" not in health
        async with asyncio.timeout(10):
            while not json.loads((await _get(f"{address.url}/healthz"))[1])["public"]["feed_up"]:
                await asyncio.sleep(0.05)


async def test_the_secure_delay_socket_wants_its_token(mosquitto_session):
    settings = make_studio_settings(
        mosquitto_session.url,
        tables=["t1"],
        secure={"delay_seconds": 1.0, "token": "s3cret-s3cret-s3cret"},
    )
    async with running_studio(settings) as address:
        ws = address.url.replace("http", "ws")
        assert await _refused(f"{ws}/ws/tables/t1/secure-delay") == 403
        assert await _refused(f"{ws}/ws/tables/t1/secure-delay?token=wrong") == 403
        async with websockets.connect(
            f"{ws}/ws/tables/t1/secure-delay?token=s3cret-s3cret-s3cret"
        ) as socket:
            first = json.loads(await asyncio.wait_for(socket.recv(), 5))
        assert first["type"] == "state" and first["mode"] == "secure-delay"
        async with websockets.connect(f"{ws}/ws/tables/t1/public") as socket:
            first = json.loads(await asyncio.wait_for(socket.recv(), 5))
        assert first["mode"] == "public" and first["view"]["table"] == "t1"


async def test_a_pit_section_mounts_the_pit_console(mosquitto_session):
    from controller.studio.pit.passwords import hash_password

    pit = {
        "users": [
            {"name": "alice", "role": "pitboss", "password_hash": hash_password("pw", n=2**10)}
        ],
        "session_secret": "x" * 40,
        "mqtt": {"urls": [mosquitto_session.url], "connect_timeout": 2.0},
    }
    async with running_studio(
        make_studio_settings(mosquitto_session.url, tables=["t1"], pit=pit)
    ) as address:
        status, text = await _get(f"{address.url}/pit/login")
        assert status == 200 and "Pit console: sign in" in text and '<base href="/pit/">' in text
        status, text = await _get(f"{address.url}/tables/t1/dealer")
        assert status == 200
    async with running_studio(make_studio_settings(mosquitto_session.url, tables=["t1"])) as bare:
        status, _ = await _get(f"{bare.url}/pit/login")
        assert status == 404, "no [pit] section, no console"
