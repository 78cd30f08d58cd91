"""The screenshot matrix's parts: a real table driven into each state, four pages watching it.

:func:`game_stage` runs, for one game, a studio (public floor, secure-delay floor with a short
delay, the pit console mounted at ``/pit``), a simulated table on the scanner simulator's pty
(the real driver, the simulated betting system) and four pages in one Chromium: the dealer
screen, the public overlay, the secure-delay overlay and the pit console. The table is driven
through the states of the issue's matrix in two rounds:

* round 1: **betting** (the betting window), **dealing** (the third card's first twelve
  transmissions are lost: 6 s with two cards on the table), **halted** (the scanner's cable
  pulled at the fifth card for longer than ``rounds.device_halt_seconds``), **voided** (the
  pit void command, after the pit's Void button was clicked once and nothing was published);
* round 2: **decision** (the crowd leaves the round's first window to its deadline:
  :class:`FirstWindowWaits`), **result**.

Each page is shot when *it* shows the state: a page's state is read from the last view its own
WebSocket received (so the secure-delay overlay, ``delay`` behind, is shot when it shows it),
the pit console when the dealer screen's feed shows it and a moment has passed. After the
screenshot the state must still hold (else the capture is reported, not silently kept).

Every shot is checked in the DOM (:func:`page_problems`, shared with the layout tests, and
:data:`CHECK_MORE`): no two cards and no label and card overlapping, every card in the viewport
and (overlays) the title-safe area, no raw token in the visible text, Mahjong tiles without a
suit glyph. What is found is collected, not raised at the first finding, so one run reports the
whole matrix (``Stage.problems``; ``report.json`` beside the screenshots).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import struct
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt
from playwright.async_api import Browser, Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from controller.games.registry import GAME_IDS
from controller.studio.pit.passwords import hash_password
from controller.studio.view import game_name
from simulators.betting import BettingPolicy
from simulators.faults import CardFault, FaultPlan
from simulators.table import Simulation
from tests.studio._harness import make_studio_settings, running_studio, running_table, wait_for
from tests.studio._pages import page_problems
from tests.support.browser import artifacts_dir

PAGES = ("dealer", "overlay", "overlay-secure", "pit")
"""The pages of the matrix (file names: ``{game}-{page}-{state}.png``)."""

STATES = ("betting", "dealing", "decision", "result", "halted", "voided")
"""The states of the matrix (Teen Patti 20-20 has no decision)."""

SECURE_DELAY = 0.5
"""The secure-delay floor's delay in the matrix (seconds): short, so the matrix stays short."""

DECISION_SECONDS = 5
"""How long round 2's first decision window stays open (the crowd leaves it to its deadline)."""

GAME_OPTIONS: dict[str, dict[str, Any]] = {
    "teen-patti-20-20": {},
    "three-card-mulligan": {"decision_seconds": DECISION_SECONDS},
    "break-poker": {"setting_seconds": DECISION_SECONDS},
    "texas-holdem": {"seats": 6, "action_seconds": DECISION_SECONDS, "equity_samples": 5000},
    "mahjong-pai-gow": {"bank_seconds": DECISION_SECONDS},
}
"""Each game's options in the matrix: its default layout, decision windows a few seconds long."""

HAS_DECISION = {game: game != "teen-patti-20-20" for game in GAME_OPTIONS}

PIT_USER, PIT_PASSWORD = "gallery", "gallery-pit-password"
VIEWPORTS: Mapping[str, tuple[int, int]] = {
    "dealer": (1920, 1080),
    "overlay": (1920, 1080),
    "overlay-secure": (1920, 1080),
    "pit": (1440, 900),
}
"""The dealer screen and the overlays as broadcast (1080p); the pit console on a laptop."""

BROADCAST_BACKDROP = (
    "html{background:linear-gradient(135deg,#3d5a4a 0%,#24343f 55%,#151b22 100%) !important}"
)
"""Behind a transparent overlay in its screenshot: a dark 'picture', as the mixer shows it."""

CHECK_MORE = r"""
([pageName, game, gameName, table, roundId]) => {
  const problems = [];
  const vw = window.innerWidth, vh = window.innerHeight;
  const visible = (el) => {
    if (el.closest('[hidden]')) return false;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.display === 'none') return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const cards = [...document.querySelectorAll('[data-role="card"], .card[data-slot]')]
    .filter(visible);
  const name = (el) => `${el.dataset.slot || el.dataset.hand || el.className}`;
  // The title-safe area of a broadcast frame: 90% of it, centred.
  if (pageName.startsWith('overlay')) {
    const left = vw * 0.05, right = vw * 0.95, top = vh * 0.05, bottom = vh * 0.95;
    for (const el of cards) {
      const r = el.getBoundingClientRect();
      if (r.left < left - 0.5 || r.right > right + 0.5 || r.top < top - 0.5 ||
          r.bottom > bottom + 0.5) {
        problems.push(`card ${name(el)} outside the title-safe area (90% of ${vw}x${vh})`);
      }
    }
  }
  // Words that run into other words or onto a card: the boxes of the text itself (a long
  // hand name overflowing its seat is drawn outside its element's box).
  const overlap = (a, b) =>
    Math.min(a.right, b.right) - Math.max(a.left, b.left) > 2 &&
    Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 2;
  const labels = [...document.querySelectorAll('[data-role="label"]')].filter(visible);
  const texts = labels.map((label) => {
    const rects = [];
    const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) continue;
      if (node.parentElement.closest('[data-role="label"]') !== label) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const r of range.getClientRects()) {
        // The glyphs, not the font's whole ascent and descent: a huge line set tight (the
        // dealer's "A2") has a text box taller than its ink, reaching the line above.
        const inset = r.height * 0.2;
        if (r.width > 0 && r.height > 0) {
          rects.push({left: r.left, right: r.right, top: r.top + inset, bottom: r.bottom - inset});
        }
      }
    }
    return [label, rects];
  });
  const said = (el) => JSON.stringify((el.textContent || '').trim().slice(0, 40));
  for (let i = 0; i < texts.length; i += 1) {
    const [a, ra] = texts[i];
    for (let j = i + 1; j < texts.length; j += 1) {
      const [b, rb] = texts[j];
      if (a.contains(b) || b.contains(a)) continue;
      if (ra.some((x) => rb.some((y) => overlap(x, y)))) {
        problems.push(`the words ${said(a)} and ${said(b)} are drawn over each other`);
      }
    }
    for (const card of cards) {
      if (a.contains(card) || card.contains(a)) continue;
      const box = card.getBoundingClientRect();
      if (ra.some((x) => overlap(x, box))) {
        problems.push(`the words ${said(a)} are drawn over card ${name(card)}`);
      }
    }
  }
  // Mahjong: a tile is a tile, never a playing card with a suit glyph.
  if (game === 'mahjong-pai-gow') {
    for (const el of cards) {
      const text = el.textContent || '';
      const glyph = /[\u2660-\u2667]/.exec(text);
      if (glyph) problems.push(`tile ${name(el)} carries the suit glyph ${glyph[0]}`);
      if (el.dataset.card && el.dataset.kind === 'card') {
        problems.push(`tile ${name(el)} (${el.dataset.card}) drawn as a playing card`);
      }
    }
  }
  const text = document.body.innerText;
  for (const token of ['[object Object]', 'NaN']) {
    if (text.includes(token)) problems.push(`raw token ${JSON.stringify(token)} in the text`);
  }
  // A slot or element id (bar-s1, seat-s3), not the table's own name.
  // A round id carries its journal's short id (8 hex digits, docs/mqtt.md "Journal identity"):
  // the pit shows round ids where one is asked for, and a short id that starts with letters
  // is no slot id.
  const ids = (text.replaceAll(table, '').match(/\b[a-z]+-[a-z]+\d+\b/g) || [])
    .filter((id) => !/-[0-9a-f]{8}$/.test(id));
  for (const id of new Set(ids)) problems.push(`raw id ${JSON.stringify(id)} in the visible text`);
  // The game's id (any case: a style may print it in capitals) where its name is meant.
  if (text.toLowerCase().includes(game)) {
    problems.push(`the game's id ${JSON.stringify(game)} in the visible text`);
  }
  // The game's id turned into words ("teen patti 20 20") where its name is meant.
  const spaced = game.replaceAll('-', ' ');
  if (gameName && spaced !== gameName && text.includes(spaced)) {
    problems.push(`the game's id ${JSON.stringify(spaced)} where its name ` +
      `${JSON.stringify(gameName)} is meant`);
  }
  // The round's id where its number is meant (the pit console names rounds by id: allowed).
  if (roundId && pageName !== 'pit' && text.includes(roundId)) {
    problems.push(`the round id ${JSON.stringify(roundId)} in the visible text`);
  }
  return problems;
}
"""
"""More checks than the layout tests' (:func:`page_problems`): see the module notes."""


@dataclass(frozen=True, slots=True)
class FirstWindowWaits(BettingPolicy):
    """The simulated crowd, which leaves the second round's first window to its deadline.

    So the table sits in a decision for the window's full length (``DECISION_SECONDS``) once,
    long enough to shoot four pages; every other window is answered at once (it never
    abstains otherwise: a window left to its deadline only slows the matrix).

    Attributes:
        waited: ``[True]`` once round 2's first window was left to its deadline.
    """

    abstain: float = 0.0
    waited: list[bool] = field(default_factory=list)

    def decide(self, step_info: Mapping[str, Any]) -> dict[str, Any] | None:
        """``None`` (the deadline's default) for round 2's first window; else the policy's."""
        number = str(step_info.get("round")).rsplit("-", 1)[-1]  # round ids end with the number
        if number.isdigit() and int(number) == 2 and not self.waited:
            self.waited.append(True)
            return None
        return BettingPolicy.decide(self, step_info)


@dataclass
class Watched:
    """A page of the matrix and the last table view its own WebSocket received.

    Attributes:
        name: One of :data:`PAGES`.
        page: The Chromium page.
        view: The last ``view`` received (the pit: none; it follows the dealer screen's).
        errors: Script errors the page raised.
    """

    name: str
    page: Page
    view: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)

    def follow(self) -> None:
        """Record every view the page's socket receives, and the page's script errors."""

        def on_frame(payload: Any) -> None:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                message = json.loads(payload)
                if isinstance(message, dict) and isinstance(message.get("view"), dict):
                    self.view = message["view"]

        self.page.on("websocket", lambda ws: ws.on("framereceived", on_frame))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))


Condition = Callable[[dict[str, Any]], bool]


def _round(view: dict[str, Any]) -> dict[str, Any]:
    value = view.get("round")
    return value if isinstance(value, dict) else {}


def in_state(state: str, round_no: int) -> Condition:
    """Whether a view shows ``state`` (one of :data:`STATES`) in round ``round_no``."""

    def holds(view: dict[str, Any]) -> bool:
        current = _round(view)
        if current.get("no") != round_no:
            return False
        halted = bool(current.get("halted"))
        if state == "betting":
            return current.get("state") == "betting_open"
        if state == "dealing":
            dealt = [c for c in current.get("cards") or [] if isinstance(c, dict)]
            return (
                current.get("state") == "dealing"
                and len(dealt) >= 2
                and not halted
                and not current.get("decision")
            )
        if state == "halted":
            return halted
        if state == "voided":
            return current.get("state") == "voided"
        if state == "decision":
            return bool(current.get("decision")) and not halted
        if state == "result":
            return current.get("state") == "settled"
        raise ValueError(f"unknown state {state!r}")

    return holds


@dataclass
class Stage:
    """One game's table, studio and pages, and what the matrix found.

    Attributes:
        game: The game id.
        table: The table id.
        pages: The four pages by name.
        commands: Every ``cmd/`` message published for the table (topic, payload).
        problems: What the checks found: ``"{game} {page} {state}: {problem}"``.
        shots: The screenshots taken, by ``(page, state)``.
    """

    game: str
    table: str
    pages: dict[str, Watched]
    commands: list[tuple[str, bytes]]
    mqtt_url: str
    problems: list[str] = field(default_factory=list)
    shots: dict[tuple[str, str], Path] = field(default_factory=dict)
    shot_seconds: dict[tuple[str, str], float] = field(default_factory=dict)

    def found(self, page: str, state: str, problem: str) -> None:
        """Note a problem of ``page`` at ``state``."""
        self.problems.append(f"{self.game} {page} {state}: {problem}")

    async def capture(
        self, state: str, round_no: int, seconds: float = 30, pages: tuple[str, ...] = PAGES
    ) -> None:
        """Shoot and check ``pages`` once each shows ``state`` of round ``round_no``.

        A page that never shows it, or leaves it before its screenshot is taken, is a finding
        (the matrix goes on: one run reports everything).
        """
        holds = in_state(state, round_no)
        await asyncio.gather(
            *(self._capture_one(self.pages[name], state, holds, seconds) for name in pages)
        )

    async def _capture_one(
        self, watched: Watched, state: str, holds: Condition, seconds: float
    ) -> None:
        source = self.pages["dealer"] if watched.name == "pit" else watched
        try:
            await wait_for(
                lambda: source.view is not None and holds(source.view),
                seconds,
                f"the {watched.name} page showing {state}",
            )
        except AssertionError as missed:
            self.found(watched.name, state, f"not shown: {missed}")
            return
        seen = time.monotonic()
        # Drawn: two animation frames after the view arrived (the pit: its own feed's moment).
        await asyncio.sleep(0.4 if watched.name == "pit" else 0.05)
        await watched.page.evaluate(
            "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )
        path = screens_dir() / f"{self.game}-{watched.name}-{state}.png"
        await watched.page.screenshot(path=str(path))
        # Whether the shot shows the state: the view still holding it when the capture is
        # back. The DOM checks below take seconds under a full suite's load (up to 4 s seen,
        # six workers on two cores); a state that ends while they run was still shot in it.
        shot = time.monotonic() - seen
        held = source.view is not None and holds(source.view)
        self.shots[(watched.name, state)] = path
        self.shot_seconds[(watched.name, state)] = shot
        problems = await page_problems(watched.page)
        round_id = str(_round(source.view or {}).get("id") or "")
        problems += await watched.page.evaluate(
            CHECK_MORE, [watched.name, self.game, game_name(self.game), self.table, round_id]
        )
        problems += [f"script error: {error}" for error in watched.errors]
        watched.errors.clear()
        for problem in dict.fromkeys(str(p) for p in problems):
            self.found(watched.name, state, problem)
        if not held:
            self.found(
                watched.name,
                state,
                f"the page left {state} before its screenshot was taken (after "
                f"{shot:.1f} s: the shot may show the next state)",
            )

    async def void_button_publishes_nothing_first(self) -> None:
        """Click the pit's Void once (a reason typed where the page has a field for it):
        nothing may be published on ``cmd/pit/void`` before a confirmation."""
        pit = self.pages["pit"].page
        card = pit.locator(
            f'[data-role="table"][data-table="{self.table}"], #card-{self.table}'
        ).first
        button = card.locator('[data-role="void"], button.void').first
        try:
            await button.wait_for(state="visible", timeout=10_000)
        except PlaywrightTimeoutError:
            self.found("pit", "halted", "no Void button on the halted table's card")
            return
        reason = card.locator(".void-reason")
        if await reason.count():  # the console before issue 23 took the reason beside the button
            await reason.first.fill("screenshot matrix: the Void button clicked once")
        before = len(self.commands)
        await button.click()
        await asyncio.sleep(1.5)  # a console that sends on the click has sent by now
        sent = [topic for topic, _ in self.commands[before:] if topic.endswith("/cmd/pit/void")]
        if sent:
            self.found("pit", "halted", "the Void button published a void before any confirmation")
        shot = screens_dir() / f"{self.game}-pit-void-confirm.png"
        await pit.screenshot(path=str(shot))
        self.shots[("pit", "void-confirm")] = shot
        cancel = pit.locator('[data-role="confirm-cancel"]')
        if await cancel.count() and await cancel.first.is_visible():
            await cancel.first.click()

    async def recall(self, round_id: str) -> None:
        """The pit console recalls ``round_id`` (just settled): shot and checked as "recall"."""
        pit = self.pages["pit"].page
        await pit.locator('[data-role="recall-round"], #recall-round').first.fill(round_id)
        await pit.locator('[data-role="recall-go"], #recall-go').first.click()
        result = pit.locator('[data-role="recall-result"], #recall-result').first
        await wait_for(result.text_content, 20, f"{self.game}: the pit's recall of {round_id}")
        recalled = pit.locator('[data-role="recalled"], #recall-result').first
        await recalled.scroll_into_view_if_needed()  # where a pit boss scrolls to read it
        await asyncio.sleep(0.3)  # drawn
        path = screens_dir() / f"{self.game}-pit-recall.png"
        await pit.screenshot(path=str(path))
        self.shots[("pit", "recall")] = path
        problems = await page_problems(pit)
        problems += await pit.evaluate(
            CHECK_MORE, ["pit", self.game, game_name(self.game), self.table, round_id]
        )
        for problem in dict.fromkeys(str(p) for p in problems):
            self.found("pit", "recall", problem)

    async def void(self, round_id: str) -> None:
        """The pit's void command for ``round_id``, as the pit role sends it (unless sent)."""
        if any(topic.endswith("/cmd/pit/void") for topic, _ in self.commands):
            return  # the console's click already sent it (reported above)
        host, port = _host_port(self.mqtt_url)
        command = {
            "command_id": f"void-matrix-{uuid.uuid4().hex[:8]}",
            "round": round_id,
            "reason": "screenshot matrix",
        }
        async with asyncio.timeout(10), aiomqtt.Client(host, port) as client:
            await client.publish(f"tables/{self.table}/cmd/pit/void", json.dumps(command), qos=1)


def screens_dir() -> Path:
    """Where the matrix's screenshots go: ``tests/artifacts/screens`` (git-ignored)."""
    path = artifacts_dir() / "screens"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _host_port(url: str) -> tuple[str, int]:
    match = re.fullmatch(r"mqtt://([^:/]+):(\d+)", url)
    assert match is not None, url
    return match.group(1), int(match.group(2))


def simulation(seed: int) -> Simulation:
    """Round 1's deal: the third card's first 12 transmissions lost (the device sends it again
    every 0.5 s: 6 s of dealing with two cards on the table, long enough for four pages' shots
    under a full suite's load), the cable out at the fifth card (the halt).
    A ``delay`` fault would not hold the deal: the device's retransmission after 0.5 s
    overtakes the late frame."""
    faults = FaultPlan(
        script=(
            CardFault(at=2, kind="loss", times=12),
            CardFault(at=4, kind="unplug", seconds=1.0),
        )
    )
    return Simulation(seed=seed, deal_delay=0.15, faults=faults)


def studio_extra(table: str, mqtt_url: str) -> dict[str, Any]:
    """The studio's secure-delay floor and pit console for the matrix."""
    users = [
        {
            "name": PIT_USER,
            "role": "pitboss",
            "password_hash": hash_password(PIT_PASSWORD, n=2**10, r=8, p=1),
        }
    ]
    return {
        "secure": {"delay_seconds": SECURE_DELAY},
        "pit": {
            "users": users,
            "session_secret": "m" * 40,
            "mqtt": {
                "urls": [mqtt_url],
                "reconnect_min_seconds": 0.05,
                "reconnect_max_seconds": 0.5,
            },
            "tables": [table],
            "command_timeout": 10,
            "login": {"failure_delay_seconds": 0.2},
        },
    }


@contextlib.asynccontextmanager
async def _commands(url: str, table: str) -> AsyncIterator[list[tuple[str, bytes]]]:
    """Every message on ``tables/{table}/cmd/#`` while the block runs."""
    seen: list[tuple[str, bytes]] = []
    host, port = _host_port(url)
    ready = asyncio.Event()

    async def listen() -> None:
        async with aiomqtt.Client(host, port) as client:
            await client.subscribe(f"tables/{table}/cmd/#", qos=1)
            ready.set()
            async for message in client.messages:
                payload = message.payload
                seen.append((str(message.topic), payload if isinstance(payload, bytes) else b""))

    task = asyncio.create_task(listen(), name="cmd-listener")
    try:
        async with asyncio.timeout(10):
            await ready.wait()
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _open_pages(browser: Browser, base: str, table: str, scale: float) -> dict[str, Watched]:
    pages: dict[str, Watched] = {}
    paths = {
        "dealer": f"/tables/{table}/dealer",
        "overlay": f"/tables/{table}/overlay",
        "overlay-secure": f"/tables/{table}/overlay?mode=secure-delay",
    }
    for name in PAGES:
        width, height = VIEWPORTS[name]
        page = await browser.new_page(
            viewport={"width": width, "height": height}, device_scale_factor=scale
        )
        watched = Watched(name, page)
        watched.follow()
        if name == "pit":
            await page.goto(f"{base}/pit/")
            await page.fill("#username", PIT_USER)
            await page.fill("#password", PIT_PASSWORD)
            await page.click("#sign-in")
        else:
            await page.goto(base + paths[name])
            if name.startswith("overlay"):
                await page.add_style_tag(content=BROADCAST_BACKDROP)
        pages[name] = watched
    return pages


@contextlib.asynccontextmanager
async def game_stage(
    game: str, mqtt_url: str, browser: Browser, journal: Path, *, seed: int = 23
) -> AsyncIterator[Stage]:
    """One game's studio, table and pages (see the module notes); stopped on the way out.

    The table starts once every page is open, so each page sees round 1 from its opening.
    """
    assert game in GAME_IDS, game
    table = f"gal-{GAME_IDS.index(game) + 1}"
    settings = make_studio_settings(mqtt_url, tables=[table], **studio_extra(table, mqtt_url))
    scale = float(os.environ.get("TABLECTL_SCREENS_SCALE") or 1)
    async with (
        running_studio(settings) as address,
        _commands(mqtt_url, table) as commands,
    ):
        pages = await _open_pages(browser, address.url, table, scale)
        stage = Stage(game, table, pages, commands, mqtt_url)
        try:
            async with running_table(
                mqtt_url,
                journal,
                table_id=table,
                game=game,
                sim=simulation(seed),
                game_options=GAME_OPTIONS[game],
                betting={"think_seconds": 0.05, "policy": FirstWindowWaits(seed=seed)},
                round_settings={
                    # Betting and the result (shown through the pause) hold long enough for
                    # every page's shot with six test workers on two cores, the five games'
                    # matrices at once (3 s was not: shots took up to 3.9 s).
                    "betting_seconds": 6.0,
                    "pause_seconds": 6.0,
                    "device_halt_seconds": 0.5,
                },
            ):
                yield stage
        finally:
            for watched in pages.values():
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(10):
                        await watched.page.close()


async def play_the_matrix(stage: Stage) -> None:
    """Drive the table through every state of the matrix, shooting and checking each page."""
    await stage.capture("betting", 1)
    await stage.capture("dealing", 1)
    await stage.capture("halted", 1)
    round_id = str(_round(stage.pages["dealer"].view or {}).get("id"))

    async def void_from_the_pit() -> None:
        await stage.void_button_publishes_nothing_first()
        await stage.void(round_id)
        await stage.capture("voided", 1, pages=("pit",))

    # The other pages watch for the void meanwhile: a console that voids on the first click
    # starts the void's few seconds on screen before the check is over.
    await asyncio.gather(
        void_from_the_pit(),
        stage.capture("voided", 1, pages=("dealer", "overlay", "overlay-secure")),
    )
    if HAS_DECISION[stage.game]:
        await stage.capture("decision", 2)
    await stage.capture("result", 2, seconds=60)
    await stage.recall(str(_round(stage.pages["dealer"].view or {}).get("id")))


def write_report(stage: Stage) -> Path:
    """``report-{game}.json`` beside the screenshots: every problem, and the shots taken."""
    path = screens_dir() / f"report-{stage.game}.json"
    path.write_text(
        json.dumps(
            {
                "game": stage.game,
                "problems": stage.problems,
                "shots": {f"{page} {state}": str(p) for (page, state), p in stage.shots.items()},
                "seconds_to_shot": {
                    f"{page} {state}": round(seconds, 3)
                    for (page, state), seconds in stage.shot_seconds.items()
                },
            },
            indent=1,
        )
    )
    return path


def recompressed_png(data: bytes) -> bytes:
    """The same PNG with its image data deflated at level 9 (Chromium writes it fast, larger)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    chunks: list[tuple[bytes, bytes]] = []
    offset = 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        chunks.append((kind, data[offset + 8 : offset + 8 + length]))
        offset += 12 + length
    image = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    out = [data[:8]]
    wrote_idat = False
    for kind, body in chunks:
        if kind == b"IDAT" and wrote_idat:
            continue
        written = body
        if kind == b"IDAT":
            written, wrote_idat = zlib.compress(image, 9), True
        out.append(struct.pack(">I", len(written)) + kind + written)
        out.append(struct.pack(">I", zlib.crc32(kind + written) & 0xFFFFFFFF))
    return b"".join(out)
