"""What the studio's tests share: a studio and a simulated table in the test's loop.

* :func:`running_studio`: :func:`controller.studio.server.run_studio` as a named task,
  yielding its address once it listens; stopped (and awaited) on the way out.
* :func:`running_table`: :func:`controller.app.run_table` on the scanner simulator's pty
  (a real pty, the real driver), with the simulated betting system beside it when asked.
* :func:`follow_page_socket`: every frame of a page's socket, until the test stops it.
* :data:`OBSERVE_CARDS`: a MutationObserver the tests install in a page, logging every
  card value the page shows, with the page's clock and the round shown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import websockets

from controller.app import run_table
from controller.orchestrator import RoundSummary
from controller.settings import load_settings
from controller.studio.config import StudioSettings, studio_settings
from controller.studio.server import StudioAddress, run_studio
from simulators.table import Simulation, simulated_scanner


async def follow_page_socket(url: str, on_frame: Callable[[str], None]) -> None:
    """Hand every text frame of the page socket at ``url`` to ``on_frame``, until cancelled.

    A close with 1012 ("service restart": uvicorn's, for each socket, when the studio stops)
    ends it quietly: a studio stopped before the test cancelled its reader is the end of the
    frames, not a failure of the page (a suite run failed on that race). Any other close
    raises.
    """
    try:
        async with websockets.connect(url) as socket:
            async for text in socket:
                on_frame(str(text))
    except websockets.ConnectionClosed as closed:
        if closed.rcvd is None or closed.rcvd.code != 1012:
            raise


async def stop_readers(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel the test's reading tasks and wait for them, before the studio they read stops."""
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)


def make_studio_settings(
    url: str, *, port: int = 0, tables: list[str] | None = None, **extra: Any
) -> StudioSettings:
    """Studio settings for a test broker (fast reconnects, any free port by default)."""
    mqtt = {
        "urls": [url],
        "reconnect_min_seconds": 0.05,
        "reconnect_max_seconds": 0.5,
        "connect_timeout": 2.0,
        **extra.pop("mqtt", {}),
    }
    data: dict[str, Any] = {
        "http": {"host": "127.0.0.1", "port": port},
        "mqtt": mqtt,
        "tables": tables or [],
        **extra,
    }
    return studio_settings(data, source="test", environ={})


@contextlib.asynccontextmanager
async def running_studio(settings: StudioSettings) -> AsyncIterator[StudioAddress]:
    """The studio, running until the block ends."""
    stop = asyncio.Event()
    ready: asyncio.Future[StudioAddress] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(run_studio(settings, stop, on_ready=ready.set_result), name="studio")
    waiting: set[asyncio.Future[Any]] = {ready, task}
    done, _ = await asyncio.wait(waiting, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()  # raises what stopped it
    assert ready in done, "the studio did not start within 10 s"
    try:
        yield ready.result()
    finally:
        stop.set()
        async with asyncio.timeout(10):
            await task


@contextlib.asynccontextmanager
async def running_table(
    url: str,
    journal: Path,
    *,
    table_id: str,
    game: str = "teen-patti-20-20",
    sim: Simulation,
    rounds: int | None = None,
    game_options: dict[str, Any] | None = None,
    betting: dict[str, Any] | None = None,
    mqtt: dict[str, Any] | None = None,
    round_settings: dict[str, Any] | None = None,
) -> AsyncIterator[asyncio.Task[list[RoundSummary]]]:
    """A simulated table; yields its task (it ends after ``rounds``; cancelled on the way out).

    ``betting``: the simulated betting system's credentials and options (``{}``: anonymous;
    it thinks 0.05 s before each decision unless ``think_seconds`` says otherwise).
    """
    async with simulated_scanner(game, sim) as device:
        settings = load_settings(
            None,
            table_id=table_id,
            game=game,
            game_options=game_options or {},
            device={"url": device},
            mqtt={
                "urls": [url],
                "reconnect_min_seconds": 0.05,
                "reconnect_max_seconds": 0.5,
                **(mqtt or {}),
            },
            journal={"path": journal},
            rounds={"betting_seconds": 0.3, "pause_seconds": 0.5, **(round_settings or {})},
        )
        companions = {}
        if betting is not None:
            options = {"think_seconds": 0.05, **betting}

            async def simulated_betting(mqtt_settings: Any, stop: asyncio.Event) -> None:
                from simulators.betting import run_simulated_betting

                await run_simulated_betting(mqtt_settings.urls, table_id, stop=stop, **options)

            companions["simulated-betting"] = simulated_betting
        task = asyncio.create_task(
            run_table(settings, rounds=rounds, companions=companions), name=f"table-{table_id}"
        )
        try:
            yield task
        finally:
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


OBSERVE_CARDS = """
() => {
  window.__cards = [];
  window.__equity = [];
  const log = () => {
    const round = document.body.dataset.round || "";
    const at = performance.timeOrigin + performance.now();
    for (const el of document.querySelectorAll(".card")) {
      const card = el.dataset.card;
      if (card) window.__cards.push({at, round, slot: el.dataset.slot, card});
    }
    const equity = document.getElementById("equity");
    if (equity && !equity.hidden) window.__equity.push(equity.dataset.street);
  };
  const all = {subtree: true, childList: true, attributes: true};
  new MutationObserver(log).observe(document.body, all);
  log();
}
"""
"""Installed in a page: every card value shown, each time the DOM changes (``window.__cards``).

Also ``window.__equity``: the street of every win-probability box the page shows."""


async def wait_for(predicate: Any, seconds: float, what: str) -> None:
    """Poll ``predicate()`` (sync or async) every 20 ms until true; fail after ``seconds``."""
    try:
        async with asyncio.timeout(seconds):
            while True:
                value = predicate()
                if asyncio.iscoroutine(value):
                    value = await value
                if value:
                    return
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out after {seconds} s waiting for {what}") from None
