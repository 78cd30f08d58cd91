"""``tablectl simulate-scanner``: the scanner simulator on a pty or a TCP port.

The command belongs to the simulators (:mod:`simulators.cli`, also runnable on its own as
``python -m simulators.cli``); this module puts it into ``tablectl``.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tablectl simulate-scanner``."""
    from simulators.cli import register as register_simulator

    register_simulator(subparsers)
