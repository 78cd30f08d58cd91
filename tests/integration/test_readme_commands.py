"""Every command block of README.md, run as written against a simulated table (issue 25).

A doctest for the README: each fenced block must name its language; ``text`` and ``toml``
blocks are not commands, and every line of every ``sh`` block is run with bash, as a new user
would paste it, in a fresh directory per block (``.venv`` there is the project's), or is
listed in :data:`NOT_RUN` with the reason. A block added to the README that neither runs nor
is listed fails this test.

What cannot be as in a terminal is bounded, and said here:

* ``make`` is a stand-in (:data:`MAKE_SHIM`) for the Makefile's ``run`` target: it runs
  ``tablectl run --simulate --show $(RUN_ARGS)`` as the recipe does, without ``--linger``
  (which waits for Ctrl-C), on the test's own Mosquitto (the README's
  ``mqtt://127.0.0.1:1883`` is replaced by its URL), with the studio left out, short windows
  and, where ``RUN_ARGS`` gives no ``--rounds``, one round more than the journal holds (the
  Ctrl-C a person would press after a round). ``make`` with another target is refused.
* A round id as the README shows it (``sim-1-3f9a1c2e-000001``: its journal's identity is
  made by each run) is replaced by the same round's id in the block's journal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from controller.journal import Journal

pytestmark = [pytest.mark.hil, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
VENV = Path(sys.executable).parent.parent

NOT_COMMANDS = {"text": "a diagram or an output", "toml": "a config file's example"}
"""Block languages that hold no commands (every other block must be ``sh``)."""

_BENCH = "a benchmark: minutes of load on purpose (its figures are docs/performance.md's)"

NOT_RUN: dict[str, str] = {
    "make test": "the whole test suite, this test among it",
    ".venv/bin/tablectl run --config /etc/tablectl/tp-01.toml": (
        "a real table: its config and its serial scanner are not on a test machine"
    ),
    ".venv/bin/python bench/scan_to_publish.py": _BENCH,
    ".venv/bin/python bench/evaluators.py": _BENCH,
    ".venv/bin/python bench/drivers.py": _BENCH,
    ".venv/bin/python bench/recovery.py": _BENCH,
    ".venv/bin/python bench/equity.py": _BENCH,
    ".venv/bin/python bench/archive.py": _BENCH,
    ".venv/bin/python bench/studio_overlay.py": _BENCH,
    ".venv/bin/python bench/archive_retention.py": _BENCH,
}
"""README command lines (their comment left out) not run here, each with the reason."""

README_ROUND_ID = "sim-1-3f9a1c2e-000001"
"""The round id the README shows (its journal identity, ``3f9a1c2e``, is an example)."""

RUN_BOUNDS = "--no-studio --betting-seconds 0.3 --pause-seconds 0 --deal-delay 0.01"
"""What the stand-in ``make run`` adds after ``RUN_ARGS`` (the last of an option wins)."""

MAKE_SHIM = '''#!{python}
"""The README runner's make: `make run RUN_ARGS=...` as the Makefile's recipe, bounded."""
import os, shlex, sys
from controller.games.registry import GAME_IDS, game_spec
from controller.journal import Journal
from controller.orchestrator import META_FINISHED

given = sys.argv[1:]
targets = [word for word in given if "=" not in word]
if targets != ["run"]:
    print(f"README runner: make {{' '.join(targets)}} is not run here", file=sys.stderr)
    sys.exit(97)
words = []
for word in given:
    if word.startswith("RUN_ARGS="):
        words = shlex.split(word.split("=", 1)[1])
broker = os.environ["README_BROKER"]
words = [broker if word == "mqtt://127.0.0.1:1883" else word for word in words]
bounds = shlex.split(os.environ["README_RUN_BOUNDS"])
if "--broker" not in words:
    bounds += ["--broker", broker]
if "--rounds" not in words:
    journal = words[words.index("--journal") + 1] if "--journal" in words else "var/sim-1.sqlite"
    finished = 0
    if os.path.exists(journal):
        with Journal.open_readonly(journal) as reader:
            finished = int(reader.get_meta(META_FINISHED) or 0)
    bounds += ["--rounds", str(finished + 1)]
game = words[words.index("--game") + 1] if "--game" in words else None
if game in GAME_IDS and game_spec(game).decision_seconds_option:
    bounds += ["--decision-seconds", "0.5"]
tablectl = os.path.join(os.path.dirname(sys.executable), "tablectl")
os.execv(tablectl, [tablectl, "run", "--simulate", "--show", *words, *bounds])
'''


@dataclass
class Block:
    """A fenced block of the README."""

    line: int
    language: str
    commands: list[str] = field(default_factory=list)


def readme_blocks(text: str) -> list[Block]:
    """The README's fenced blocks, each with its language and its non-empty lines."""
    blocks: list[Block] = []
    current: Block | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if current is None:
                current = Block(number, line[3:].strip())
            else:
                blocks.append(current)
                current = None
            continue
        if current is not None and line.strip():
            current.commands.append(line.strip())
    assert current is None, f"README.md: the block at line {current.line} is not closed"
    return blocks


def _key(command: str) -> str:
    """A command line without its trailing comment and with single spaces."""
    return " ".join(command.split(" #", 1)[0].split())


SAID_TO_PEOPLE = ("tablectl run: ", "studio: ", "pit console: ")
"""Standard error's lines that are the run's messages for people, not log lines (the seed,
the studio's address: README, "The view ... the log lines")."""


def _json_lines(path: Path) -> list[str]:
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    logs = [line for line in lines if not line.startswith(SAID_TO_PEOPLE)]
    assert logs, f"{path.name} holds no log line"
    for line in logs:
        json.loads(line)  # a log line that is not one JSON object fails here
    return logs


def _view_and_json_log(workdir: Path, out: str) -> None:
    view = (workdir / "view.txt").read_text()
    assert " result: " in view and "settlement:" in view
    assert not any(line.startswith("{") for line in view.splitlines())
    _json_lines(workdir / "log.jsonl")


def _one_file_for_people(workdir: Path, out: str) -> None:
    text = (workdir / "run.txt").read_text()
    assert " result: " in text and "[info" in text
    assert not any(line.startswith("{") for line in text.splitlines())


def _view(workdir: Path, out: str) -> None:
    assert " result: " in out and "returns " in out


def _recalled(workdir: Path, out: str) -> None:
    assert "settlement (what each bet returns, stake included)" in out


def _report(workdir: Path, out: str) -> None:
    assert re.search(r"rounds\s+2\b", out), out


def _unsigned_verify(workdir: Path, out: str) -> None:
    assert "problem: unsigned: not verifiable" in out
    assert "None" not in out


@dataclass(frozen=True)
class Expect:
    """What a command must do: its exit status and a check of its output and files."""

    status: int = 0
    check: Callable[[Path, str], None] | None = None


EXPECT: dict[str, Expect] = {
    "make run": Expect(check=_view),
    "make run > view.txt 2> log.jsonl": Expect(check=_view_and_json_log),
    'make run RUN_ARGS="--log-format console --log-level INFO" > run.txt 2>&1': Expect(
        check=_one_file_for_people
    ),
    f".venv/bin/tablectl recall {README_ROUND_ID} --archive sqlite:///var/archive.sqlite": Expect(
        check=_recalled
    ),
    ".venv/bin/tablectl archive report --database sqlite:///var/archive.sqlite --table sim-1": (
        Expect(check=_report)
    ),
}
"""Commands whose outcome is checked beyond a zero exit status (by their README line)."""

UNSIGNED_VERIFY = Expect(status=1, check=_unsigned_verify)
"""``archive verify`` after a run that does not sign: exit 1, and it says why."""


def _expect(block: Block, command: str) -> Expect:
    key = _key(command)
    if key.startswith(".venv/bin/tablectl archive verify ") and not any(
        "--sign" in line for line in block.commands
    ):
        return UNSIGNED_VERIFY
    return EXPECT.get(key, Expect())


def _first_round_id(workdir: Path) -> str:
    with Journal.open_readonly(workdir / "var" / "sim-1.sqlite") as journal:
        for entry in journal.entries():
            if entry.round_id is not None:
                return entry.round_id
    raise AssertionError("the block's journal holds no round")


def readme_problems(text: str) -> list[str]:
    """What keeps a README's blocks from being run or accounted for: blocks of no known
    language (neither run nor listed), and :data:`NOT_RUN` entries no block holds."""
    problems: list[str] = []
    listed = set()
    for block in readme_blocks(text):
        if block.language in NOT_COMMANDS:
            continue
        if block.language != "sh":
            problems.append(
                f"README.md line {block.line}: a block marked {block.language!r}: mark it sh "
                f"(its lines are run by this test) or one of {sorted(NOT_COMMANDS)}"
            )
            continue
        listed |= {_key(c) for c in block.commands if _key(c) in NOT_RUN}
    problems += [f"listed in NOT_RUN, in no block: {c}" for c in sorted(set(NOT_RUN) - listed)]
    return problems


def test_every_readme_block_is_marked_and_every_command_runs_or_is_listed():
    """No network: the README's blocks are all accounted for (the runs are the next test)."""
    assert readme_problems(README.read_text()) == []


def test_the_readme_commands_run_as_written(mosquitto, tmp_path):
    shims = tmp_path / "shims"
    shims.mkdir()
    make = shims / "make"
    make.write_text(MAKE_SHIM.format(python=sys.executable))
    make.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shims}{os.pathsep}{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "README_BROKER": mosquitto.url,
        "README_RUN_BOUNDS": RUN_BOUNDS,
    }
    env.pop("TABLECTL_SIGNING__KEY_FILE", None)
    ran = 0
    for block in readme_blocks(README.read_text()):
        if block.language != "sh":
            continue  # the test above fails on a block that is neither sh nor listed
        workdir = tmp_path / f"block-{block.line}"
        workdir.mkdir()
        (workdir / ".venv").symlink_to(VENV)
        for command in block.commands:
            if _key(command) in NOT_RUN:
                continue
            line = command
            if README_ROUND_ID in line:
                line = line.replace(README_ROUND_ID, _first_round_id(workdir))
            done = subprocess.run(
                ["bash", "-c", line],
                cwd=workdir,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            where = f"README.md block at line {block.line}: {command}"
            expect = _expect(block, command)
            assert done.returncode == expect.status, (
                f"{where}: exit {done.returncode}, expected {expect.status}\n"
                f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
            )
            if expect.check is not None:
                try:
                    expect.check(workdir, done.stdout)
                except AssertionError as exc:
                    raise AssertionError(f"{where}: {exc}\nstdout: {done.stdout[-3000:]}") from exc
            ran += 1
    assert ran >= 10, f"only {ran} README commands ran"


def test_a_block_added_without_a_language_fails():
    """The check above is real: an unmarked (or unknown) block is found, and so is a listed
    command the README no longer has."""
    text = README.read_text() + "\n```\nmake something\n```\n\n```bash\nls\n```\n"
    problems = readme_problems(text)
    assert len(problems) == 2
    assert "a block marked ''" in problems[0] and "a block marked 'bash'" in problems[1]
    gone = README.read_text().replace("make test\n", "")
    assert readme_problems(gone) == ["listed in NOT_RUN, in no block: make test"]
