"""The pit console's "today against the par sheet" page (``/pit/today``), from a real archive.

The archive (SQLite) holds a day of three Teen Patti tables (``tests/support/par_rounds.py``:
fair shuffles, a short deck, a reader that reads hearts as diamonds; 600 rounds each, settled
by the game's rules). Over HTTP (Starlette's TestClient): the page needs a sign-in, names the
drifting tables in its headline, shows each bet's verdict, refuses a bad ``day`` plainly and
says when no archive is configured. In Chromium (the console served with uvicorn on a real
Mosquitto): the page as a pit boss sees it, screenshot in ``tests/artifacts/pit-today.png``.
And ``tablectl run --simulate``'s own pit console reads the archive beside the table: its
page shows the simulated table's rounds of the day.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import re
import signal
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, expect
from starlette.testclient import TestClient

from controller.studio.pit import build_pit_app
from controller.studio.pit.passwords import hash_password
from controller.studio.pit.runner import serving
from controller.studio.pit.settings import PitSettings, pit_settings
from tests.support.browser import artifacts_dir
from tests.support.par_rounds import DAY, fill, tables

FAST = {"n": 2**10, "r": 8, "p": 1}
TABLES = ["fair", "short", "misread"]


def settings(mqtt_url: str, archive: str | None) -> PitSettings:
    data: dict[str, Any] = {
        "users": [
            {"name": "alice", "role": "pitboss", "password_hash": hash_password("pw-a", **FAST)}
        ],
        "session_secret": "x" * 40,
        "mqtt": {"urls": [mqtt_url]},
        "tables": TABLES,
        "login": {"failure_delay_seconds": 0},
    }
    if archive is not None:
        data["archive_url"] = archive
    return pit_settings(data)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('today') / 'archive.sqlite'}"
    asyncio.run(fill(url, tables()))
    return url


def _signed_in(app: Any) -> TestClient:
    client = TestClient(app, base_url="http://testserver")
    form = client.get("/login").text
    found = re.search(r'name=csrf value="([^"]+)"', form)
    assert found
    answer = client.post(
        "/login",
        data={"username": "alice", "password": "pw-a", "csrf": found.group(1)},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    return client


def test_the_page_names_the_drifting_tables_and_each_bets_verdict(archive: str) -> None:
    app = build_pit_app(settings("mqtt://127.0.0.1:1", archive))
    anonymous = TestClient(app, base_url="http://testserver")
    answer = anonymous.get("/today", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/login"

    client = _signed_in(app)
    page = client.get(f"/today?day={DAY.date().isoformat()}")
    assert page.status_code == 200
    text = page.text
    headline = re.search(r"data-role=drift-headline>([^<]*)<", text)
    assert headline is not None
    assert headline.group(1).startswith("DRIFT at 2 table(s): short: ")
    assert "misread: pair plus a, pair plus b, six card bonus" in headline.group(1)
    assert "fair" not in headline.group(1)
    sections = dict(re.findall(r"data-table='(\w+)' data-verdict='([\w ]+)'", text))
    assert sections == {"fair": "in line", "short": "drift", "misread": "drift"}
    verdicts = dict(re.findall(r"data-bet='([\w ]+)' data-verdict='([\w ]+)'", text))
    assert verdicts["six_card_bonus"] in {"drift", "in line"}  # one of the three tables'
    fair = text.split("data-table='fair'")[1].split("</section>")[0]
    assert set(re.findall(r"data-verdict='([\w ]+)'", fair)) == {"in line"}
    assert "texas-holdem: no house bet: no return to compare" in fair
    # Another day has no results; a bad day is refused plainly.
    empty = client.get("/today?day=2026-11-20").text
    assert empty.count("No result this day.") == 3
    assert "No result on 2026-11-20 yet" in empty
    bad = client.get("/today?day=tomorrow")
    assert (
        bad.status_code == 400 and "day &#x27;tomorrow&#x27; is not a date (YYYY-MM-DD)" in bad.text
    )
    # The floor links to it.
    assert "href='/today'" in client.get("/").text


def test_without_an_archive_the_page_says_it_needs_one() -> None:
    client = _signed_in(build_pit_app(settings("mqtt://127.0.0.1:1", None)))
    text = client.get("/today").text
    assert "This needs the studio archive" in text


@pytest.mark.hil
async def test_the_page_in_chromium(mosquitto, archive: str, browser: Browser) -> None:
    app = build_pit_app(settings(mosquitto.url, archive))
    async with serving(app) as url:
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        page = await context.new_page()
        await page.goto(url + "/")
        await page.fill("#username", "alice")
        await page.fill("#password", "pw-a")
        await page.click("#sign-in")
        await page.click("#today-link")
        await expect(page.locator("[data-role=drift-headline]")).to_contain_text("No result")
        await page.goto(f"{url}/today?day={DAY.date().isoformat()}")
        headline = page.locator("[data-role=drift-headline]")
        await expect(headline).to_contain_text("DRIFT at 2 table(s)")
        path = Path(artifacts_dir()) / "pit-today.png"
        await page.screenshot(path=str(path), full_page=True)
        # Readable: the headline is large and red; every verdict is on screen, not clipped.
        size = await headline.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
        assert size >= 24
        colour = await headline.evaluate("e => getComputedStyle(e).backgroundColor")
        assert colour == "rgb(194, 65, 59)"
        badges = page.locator("table.drift .verdict")
        assert await badges.count() == 18
        for index in range(await badges.count()):
            box = await badges.nth(index).bounding_box()
            assert box is not None and box["x"] + box["width"] <= 1280
        await context.close()


def _signed_in_page(pit_url: str, password: str, path: str) -> str:
    """Sign in to a served pit console as ``pit`` and read ``path``."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    form = opener.open(pit_url + "login", timeout=5).read().decode()
    token = re.search(r'name="?csrf"? value="?([^" >]+)', form)
    assert token is not None, form
    body = urllib.parse.urlencode(
        {"username": "pit", "password": password, "csrf": token.group(1)}
    ).encode()
    opener.open(pit_url + "login", data=body, timeout=10).read()
    return str(opener.open(pit_url + path, timeout=60).read().decode())


@pytest.mark.hil
async def test_the_simulated_tables_pit_console_reads_its_archive(mosquitto, tmp_path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller.cli", "run", "--simulate", "--broker", mosquitto.url,
        "--journal", str(tmp_path / "sim-1.sqlite"), "--rounds", "2", "--linger",
        "--betting-seconds", "0.2", "--pause-seconds", "0.1", "--deal-delay", "0",
        "--studio-port", "0", "--studio-secure-delay", "0", "--log-level", "WARNING",
        "--seed", "5",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        pit_line = ""
        async with asyncio.timeout(60):
            while True:
                line = (await process.stderr.readline()).decode()
                assert line, f"tablectl run ended early: {pit_line}"
                if line.startswith("pit console: "):
                    pit_line = line
                if "--linger keeps the studio serving" in line:
                    break
        pit_url = pit_line.split()[2]
        password = pit_line.split("password ")[1].split("'")[1]
        page = await asyncio.to_thread(_signed_in_page, pit_url, password, "today")
        assert "data-table='sim-1'" in page
        assert "teen-patti-20-20: 2 results" in page
        assert "data-bet='player_a'" in page
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(20):
            await process.stderr.read()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
