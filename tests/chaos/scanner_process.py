"""The scanner simulator as a process of its own, recording every card it deals.

``python -m tests.chaos.scanner_process --record FILE simulate-scanner --tcp PORT --seed S
...`` runs ``tablectl simulate-scanner`` itself (:func:`simulators.cli.run`, same options,
same defaults), with one addition: every CARD frame the simulator puts on the line is
appended to ``FILE`` as a JSON line (``{"round_no", "card", "pid"}``) by an unbuffered
``write``, so a SIGKILL loses nothing. The chaos suite compares the cards of every result
with this record ("the cards are ones the simulator dealt in that round").

``tablectl simulate-scanner`` has no such record; if it gets one (e.g. ``--record FILE``),
this wrapper can go.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import simulators.scanner
from drivers.codec import CardFrame
from simulators.cli import register

_record_fd: int | None = None


class RecordingSimulator(simulators.scanner.ScannerSimulator):
    """The simulator, writing each CARD frame it queues (with its round) to the record."""

    def _enqueue(self, frame: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(frame, CardFrame) and _record_fd is not None:
            line = {"round_no": self._round, "card": frame.value, "pid": os.getpid()}
            os.write(_record_fd, (json.dumps(line) + "\n").encode())
        super()._enqueue(frame, *args, **kwargs)


def main(argv: list[str] | None = None) -> int:
    global _record_fd  # noqa: PLW0603
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != "--record":
        print("usage: scanner_process --record FILE simulate-scanner ...", file=sys.stderr)
        return 2
    _record_fd = os.open(argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    simulators.scanner.ScannerSimulator = RecordingSimulator  # type: ignore[misc]
    parser = argparse.ArgumentParser(prog="scanner_process")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register(subparsers)
    args = parser.parse_args(argv[2:])
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
