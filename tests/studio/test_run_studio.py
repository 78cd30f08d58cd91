"""``tablectl run --simulate`` starts the studio beside the table and prints its address."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest
import websockets

from controller.studio.errors import StudioError
from controller.studio.server import bind

pytestmark = pytest.mark.hil


async def test_run_simulate_serves_the_studio_and_prints_its_address(mosquitto, tmp_path):
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller.cli", "run", "--simulate", "--broker", mosquitto.url,
        "--rounds", "2", "--journal", str(tmp_path / "j.sqlite"), "--betting-seconds", "0.5",
        "--deal-delay", "0.2", "--studio-port", "0", "--log-level", "WARNING",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        async with asyncio.timeout(30):
            while True:
                line = (await process.stderr.readline()).decode()
                assert line, "tablectl run ended without printing the studio's address"
                if line.startswith("studio: "):
                    break
        dealer, overlay, secure = line.split()[1:4]
        async with asyncio.timeout(10):
            pit_line = (await process.stderr.readline()).decode()
        assert pit_line.startswith("pit console: http://127.0.0.1:"), pit_line
        pit_url = pit_line.split()[2]
        password = pit_line.split("password ")[1].split("'")[1]
        assert len(password) >= 12
        cookie = await _signs_in(pit_url, "pit", password)
        assert dealer.startswith("http://127.0.0.1:") and dealer.endswith("/tables/sim-1/dealer")
        assert overlay.endswith("/tables/sim-1/overlay")
        assert secure.endswith("/tables/sim-1/overlay?mode=secure-delay")
        page = await asyncio.to_thread(lambda: urllib.request.urlopen(dealer, timeout=5).read())
        assert b"dealer.js" in page
        socket_url = dealer.replace("http://", "ws://").replace(
            "/tables/sim-1/dealer", "/ws/tables/sim-1/public"
        )
        async with websockets.connect(socket_url) as ws, asyncio.timeout(20):
            while True:
                state = json.loads(await ws.recv())
                if state["view"]["round"]["id"]:
                    break
        assert state["view"]["table"] == "sim-1"
        # The pit console's floor reads the studio's feed (one link: docs/studio.md).
        pit_table = await _pit_floor_table(pit_url, cookie, "sim-1")
        assert pit_table["round"] and pit_table["game"] == "teen-patti-20-20", pit_table
        _one_studio_link(mosquitto.log())
        async with asyncio.timeout(60):
            await process.stderr.read()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_a_taken_port_falls_back_only_when_asked():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(StudioError, match=f"cannot listen on 127.0.0.1:{port}"):
            bind("127.0.0.1", port)
        other = bind("127.0.0.1", port, fallback_to_free=True)
        try:
            assert other.getsockname()[1] not in (0, port)
        finally:
            other.close()


def test_a_taken_port_names_its_holder(capsys):
    """Issue 25: a studio port that is taken names the process holding it."""
    import os

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(StudioError) as raised:
            bind("127.0.0.1", port)
    text = str(raised.value)
    assert f"held by pid {os.getpid()}: " in text
    assert "--studio-port 0 (or http.port = 0) picks a free port" in text


def test_run_with_a_taken_studio_port_is_an_error_not_another_port(mosquitto, tmp_path, capsys):
    """Issue 25: ``--studio-port P`` taken was silently replaced by a random port (an OBS
    browser source set up on P broke); now the run ends at start, naming who holds P."""
    import os

    from controller.cli import main

    journal = tmp_path / "j.sqlite"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code = main(
            ["run", "--simulate", "--broker", mosquitto.url, "--rounds", "1", "--journal",
             str(journal), "--no-archive", "--studio-port", str(port)]
        )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert f"tablectl run: the studio cannot listen on 127.0.0.1:{port}" in err
    assert f"held by pid {os.getpid()}" in err
    assert not journal.exists() or "round_opened" not in journal.read_bytes().decode("latin-1")


async def _signs_in(pit_url: str, user: str, password: str) -> str:
    """The printed pit console takes the printed user and password (and not a wrong one).

    Returns:
        The signed-in session's ``Cookie`` header.
    """
    import http.cookiejar
    import re
    import urllib.parse

    def sign_in(with_password: str) -> tuple[str, str]:
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        form = opener.open(pit_url + "login", timeout=5).read().decode()
        token = re.search(r'name="?csrf"? value="?([^" >]+)', form)
        assert token is not None, form
        body = urllib.parse.urlencode(
            {"username": user, "password": with_password, "csrf": token.group(1)}
        ).encode()
        try:
            page = str(opener.open(pit_url + "login", data=body, timeout=10).read().decode())
        except urllib.error.HTTPError as error:
            page = str(error.read().decode())
        return page, "; ".join(f"{c.name}={c.value}" for c in jar)

    wrong, _ = await asyncio.to_thread(sign_in, password + "x")
    assert "wrong user name or password" in wrong
    page, cookie = await asyncio.to_thread(sign_in, password)
    assert 'data-user="pit" data-role="pitboss"' in page, page[:500]
    return cookie


async def _pit_floor_table(pit_url: str, cookie: str, table: str) -> dict[str, Any]:
    """The pit console's view of ``table`` once it shows a round (its page socket)."""
    origin = pit_url.split("/pit/", maxsplit=1)[0]
    socket_url = origin.replace("http://", "ws://") + "/pit/ws"
    headers = {"Cookie": cookie, "Origin": origin}
    async with websockets.connect(socket_url, additional_headers=headers) as ws:
        async with asyncio.timeout(30):
            while True:
                update = json.loads(await ws.recv())
                views = update.get("floor", {}).get("tables", [])
                if update.get("type") == "table":
                    views = [update["table"]]
                for view in views:
                    if view["table"] == table and view["round"]:
                        return dict(view)


def _one_studio_link(broker_log: str) -> None:
    """The demo's studio reads the table on one connection: its public floor, its
    secure-delay floor and the pit console's floor (same broker, same credentials); the pit
    console's own connection carries its commands' answers and the betting presence."""
    clients = re.findall(r"New client connected from \S+ as (\S+)", broker_log)
    studio = [c for c in clients if c.startswith("tablectl-studio-") and "-pit-" not in c]
    pit = [c for c in clients if c.startswith("tablectl-studio-pit-")]
    assert len(studio) == 1, clients
    assert len(pit) == 1, clients
    assert not [c for c in clients if c.endswith("-secure")], clients
