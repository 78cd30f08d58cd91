"""``tablectl devices``: the serial ports and USB devices that look like card scanners.

The discovery is :mod:`drivers.discovery`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def run(args: argparse.Namespace, *, usb_backend: Any = None) -> int:
    """List the devices; 0 when at least one candidate was found, 1 otherwise."""
    from drivers.discovery import find_devices, render

    serial_ports, usb, note = find_devices(
        known_only=args.known_only, usb_only=args.usb_only, usb_backend=usb_backend
    )
    print(render(serial_ports, usb, note))
    sys.stdout.flush()
    return 0 if serial_ports or usb else 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``devices`` sub-command."""
    parser = subparsers.add_parser(
        "devices",
        help="list serial ports and USB devices that look like card scanners",
        description="List serial ports and USB card scanners, with the URL to put in the "
        "table config's [device] url.",
    )
    parser.add_argument(
        "--known-only", action="store_true", help="only devices recognised as scanners"
    )
    parser.add_argument("--usb-only", action="store_true", help="skip serial ports")
    parser.set_defaults(func=run)
