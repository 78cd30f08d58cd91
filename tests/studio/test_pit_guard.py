"""The pit console's guards, served for real (uvicorn on loopback, httpx, a WebSocket client).

Sign-ins counted before the scrypt check (40 parallel wrong passwords), slowed per address
(the pit boss signs in from another address meanwhile), forwarded headers trusted only from a
configured proxy, logout revoking the session on HTTP and the WebSocket (an open socket of it
is closed), and the WebSocket caps. Clients bind to other loopback addresses (127.0.0.2...)
to be other clients. The console's broker is the session's real Mosquitto.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from controller.studio.pit import app as pit_app
from controller.studio.pit import build_pit_app
from controller.studio.pit.passwords import hash_password, verify_password
from controller.studio.pit.runner import serving
from controller.studio.pit.settings import PitSettings, pit_settings
from tests.studio._harness import make_studio_settings, running_studio
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING)

FAST = {"n": 2**10, "r": 8, "p": 1}
SLOW = {"n": 2**14, "r": 8, "p": 1}
"""A check that takes a while (~0.1 s), so parallel sign-ins overlap."""
SECONDS = 10.0


def settings(broker: Any, *, cost: dict[str, int] = FAST, **overrides: Any) -> PitSettings:
    return pit_settings(
        {
            "users": [
                {
                    "name": "alice",
                    "role": "pitboss",
                    "password_hash": hash_password("pw-a", **cost),
                },
                {"name": "sam", "role": "observer", "password_hash": hash_password("pw-s", **FAST)},
            ],
            "session_secret": "g" * 40,
            "mqtt": {"urls": [broker.url]},
            "tables": ["tp-01"],
            "login": {"failure_delay_seconds": 0, "max_failures": 5, "lockout_seconds": 60},
            **overrides,
        }
    )


@asynccontextmanager
async def browser_like(url: str, source: str = "127.0.0.1") -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.AsyncHTTPTransport(local_address=source)
    async with httpx.AsyncClient(base_url=url, transport=transport, timeout=SECONDS) as client:
        yield client


async def form_token(client: httpx.AsyncClient, headers: dict[str, str] | None = None) -> str:
    page = await client.get("/login", headers=headers)
    found = re.search(r'name=csrf value="([^"]+)"', page.text)
    assert found, page.text
    return found.group(1)


async def sign_in(
    client: httpx.AsyncClient,
    user: str,
    password: str,
    headers: dict[str, str] | None = None,
    token: str | None = None,
) -> httpx.Response:
    token = token or await form_token(client, headers)
    return await client.post(
        "/login",
        data={"username": user, "password": password, "csrf": token},
        headers=headers,
    )


def counting_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every scrypt check the app makes (the real check still runs)."""
    checked: list[str] = []

    def verify(password: str, stored: Any) -> bool:
        checked.append(password)
        return verify_password(password, stored)

    monkeypatch.setattr(pit_app, "verify_password", verify)
    return checked


async def test_forty_parallel_wrong_passwords_get_at_most_the_limit_checked(
    mosquitto_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = counting_checks(monkeypatch)
    async with (
        serving(build_pit_app(settings(mosquitto_session, cost=SLOW))) as url,
        browser_like(url) as guesser,
    ):
        token = await form_token(guesser)
        # Every guess carries the form's cookie as it was (answers set new ones as they come).
        form_cookie = {"Cookie": f"tablectl_pit={guesser.cookies['tablectl_pit']}"}
        async with browser_like(url) as parallel:
            answers = await asyncio.gather(
                *(
                    sign_in(parallel, "alice", f"guess-{n}", headers=form_cookie, token=token)
                    for n in range(40)
                )
            )
        codes = sorted(answer.status_code for answer in answers)
        assert len(checked) <= 5, f"{len(checked)} passwords checked, the limit is 5"
        assert codes == [401] * len(checked) + [429] * (40 - len(checked))
        slowed = next(answer for answer in answers if answer.status_code == 429)
        assert "too many wrong sign-ins from this address" in slowed.text
        # The guesser's address is slowed, even with the right password...
        assert (await sign_in(guesser, "alice", "pw-a")).status_code == 429
        # ... but the pit boss, at another address, signs in at once.
        async with browser_like(url, "127.0.0.2") as pit_boss:
            answer = await sign_in(pit_boss, "alice", "pw-a")
            assert answer.status_code == 303, answer.text
            assert "alice (pitboss)" in (await pit_boss.get("/")).text


async def test_forwarded_headers_from_an_untrusted_peer_are_ignored(
    mosquitto_session: Any,
) -> None:
    limits = {"failure_delay_seconds": 0, "max_failures": 3, "lockout_seconds": 60}
    async with (
        serving(build_pit_app(settings(mosquitto_session, login=limits))) as url,
        browser_like(url) as guesser,
    ):
        for n in range(3):  # a new name and a new forged address each time
            forged = {"X-Forwarded-For": f"192.0.2.{n}", "Forwarded": f"for=192.0.2.{n}"}
            answer = await sign_in(guesser, f"user{n}", "guess", headers=forged)
            assert answer.status_code == 401
        forged = {"X-Forwarded-For": "192.0.2.99", "Forwarded": "for=192.0.2.99"}
        answer = await sign_in(guesser, "alice", "guess", headers=forged)
        assert answer.status_code == 429, "127.0.0.1 is the client, whatever it claims"


async def test_the_studio_mounting_the_console_ignores_forwarded_headers_too(
    mosquitto_session: Any,
) -> None:
    # uvicorn's own proxy handling (on by default, trusting 127.0.0.1) is off in the studio.
    pit = settings(
        mosquitto_session,
        login={"failure_delay_seconds": 0, "max_failures": 3, "lockout_seconds": 60},
    ).model_dump(mode="json")
    pit["session_secret"] = "g" * 40
    studio = make_studio_settings(mosquitto_session.url, tables=["tp-01"], pit=pit)
    async with running_studio(studio) as address, browser_like(address.url + "/pit") as guesser:
        for n in range(3):
            forged = {"X-Forwarded-For": f"192.0.2.{n}"}
            assert (await sign_in(guesser, f"user{n}", "guess", headers=forged)).status_code == 401
        forged = {"X-Forwarded-For": "192.0.2.99"}
        assert (await sign_in(guesser, "alice", "pw-a", headers=forged)).status_code == 429


async def test_forwarded_headers_from_a_configured_proxy_name_the_client(
    mosquitto_session: Any,
) -> None:
    limits = {"failure_delay_seconds": 0, "max_failures": 3, "lockout_seconds": 60}
    pit = settings(mosquitto_session, login=limits, trusted_proxies=["127.0.0.1/32"])
    async with serving(build_pit_app(pit)) as url, browser_like(url) as proxy:
        guesser = {"X-Forwarded-For": "203.0.113.7"}
        for _ in range(3):
            assert (await sign_in(proxy, "alice", "guess", headers=guesser)).status_code == 401
        # The client forging the left part of the chain is still 203.0.113.7 (the proxy's entry).
        spoofing = {"X-Forwarded-For": "198.51.100.1, 203.0.113.7"}
        assert (await sign_in(proxy, "alice", "pw-a", headers=spoofing)).status_code == 429
        # A header the proxy does not set is not read.
        other = {"X-Forwarded-For": "203.0.113.7", "Forwarded": "for=198.51.100.2"}
        assert (await sign_in(proxy, "alice", "pw-a", headers=other)).status_code == 429
        # Another client behind the same proxy is not slowed.
        pit_boss = {"X-Forwarded-For": "203.0.113.8"}
        assert (await sign_in(proxy, "alice", "pw-a", headers=pit_boss)).status_code == 303
    async with (
        serving(build_pit_app(pit)) as url,
        browser_like(url, "127.0.0.3") as untrusted,
    ):
        for n in range(3):
            forged = {"X-Forwarded-For": f"203.0.113.{n}"}
            await sign_in(untrusted, "alice", "guess", headers=forged)
        forged = {"X-Forwarded-For": "203.0.113.50"}
        answer = await sign_in(untrusted, "alice", "pw-a", headers=forged)
        assert answer.status_code == 429, "127.0.0.3 is no configured proxy"


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


@asynccontextmanager
async def page_socket(
    url: str, cookie: str, source: str = "127.0.0.1"
) -> AsyncIterator[ClientConnection]:
    async with connect(
        ws_url(url),
        additional_headers={"Cookie": f"tablectl_pit={cookie}"},
        local_addr=(source, 0),
        open_timeout=SECONDS,
    ) as socket:
        yield socket


async def closed_with(socket: ClientConnection) -> tuple[int, str]:
    """Read until the server closes; its code and reason."""

    async def drain() -> None:
        async with asyncio.timeout(SECONDS):
            while True:
                await socket.recv()

    with pytest.raises(ConnectionClosed) as closed:
        await drain()
    assert closed.value.rcvd is not None, "the server closed the socket"
    return closed.value.rcvd.code, closed.value.rcvd.reason


async def test_a_signed_out_session_is_refused_everywhere_and_its_socket_closed(
    mosquitto_session: Any,
) -> None:
    async with (
        serving(build_pit_app(settings(mosquitto_session))) as url,
        browser_like(url) as client,
    ):
        assert (await sign_in(client, "alice", "pw-a")).status_code == 303
        cookie = client.cookies["tablectl_pit"]
        page = (await client.get("/")).text
        token = re.search(r'name=csrf value="([^"]+)"', page)
        assert token
        async with page_socket(url, cookie) as open_socket:
            first = await asyncio.wait_for(open_socket.recv(), SECONDS)
            assert '"snapshot"' in str(first)
            out = await client.post("/logout", data={"csrf": token.group(1)})
            assert out.status_code == 303
            assert await closed_with(open_socket) == (4401, "signed out")
        # Someone kept the old cookie: it opens nothing any more.
        async with browser_like(url, "127.0.0.4") as thief:
            thief.cookies.set("tablectl_pit", cookie)
            answer = await thief.get("/")
            assert answer.status_code == 303 and answer.headers["location"] == "/login"
        async with page_socket(url, cookie, "127.0.0.4") as replayed:
            assert await closed_with(replayed) == (4401, "not signed in")
        # Signing in again gives a new session that works.
        assert (await sign_in(client, "alice", "pw-a")).status_code == 303
        async with page_socket(url, client.cookies["tablectl_pit"]) as fresh:
            assert '"snapshot"' in str(await asyncio.wait_for(fresh.recv(), SECONDS))


async def test_websockets_are_capped_per_address_and_in_all(mosquitto_session: Any) -> None:
    pit = settings(mosquitto_session, sockets={"per_address": 2, "total": 3})
    async with serving(build_pit_app(pit)) as url, browser_like(url) as client:
        assert (await sign_in(client, "sam", "pw-s")).status_code == 303
        cookie = client.cookies["tablectl_pit"]

        async def opened(source: str) -> ClientConnection:
            socket = await connect(
                ws_url(url),
                additional_headers={"Cookie": f"tablectl_pit={cookie}"},
                local_addr=(source, 0),
                open_timeout=SECONDS,
            )
            return socket

        async def served(socket: ClientConnection) -> bool:
            try:
                return '"snapshot"' in str(await asyncio.wait_for(socket.recv(), SECONDS))
            except ConnectionClosed:
                return False

        kept = [await opened("127.0.0.1"), await opened("127.0.0.1")]
        try:
            assert all([await served(socket) for socket in kept])
            third = await opened("127.0.0.1")
            code, reason = await closed_with(third)
            assert code == 1013
            assert reason == "too many pit console connections from this address (limit 2)"
            kept.append(await opened("127.0.0.5"))
            assert await served(kept[-1])
            fourth = await opened("127.0.0.6")
            assert await closed_with(fourth) == (
                1013,
                "too many pit console connections in all (limit 3)",
            )
            await kept.pop(0).close()
            async with asyncio.timeout(SECONDS):
                while True:  # the server counts the closed one out
                    again = await opened("127.0.0.6")
                    if await served(again):
                        kept.append(again)
                        break
                    await asyncio.sleep(0.05)
        finally:
            for socket in kept:
                await socket.close()
