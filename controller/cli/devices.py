"""``tablectl devices``: the serial ports, USB devices and PC/SC readers that look like scanners.

The discovery is :mod:`drivers.discovery`; with ``--mqtt-readers``, the MQTT tag readers
heard on a broker (:mod:`drivers.mqtt_discovery`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def run(args: argparse.Namespace, *, usb_backend: Any = None) -> int:
    """List the devices; 0 when at least one candidate was found, 1 otherwise."""
    from drivers.discovery import find_devices, render

    serial_ports, usb, note = find_devices(
        known_only=args.known_only,
        usb_only=args.usb_only,
        usb_backend=usb_backend,
        pcsc=not getattr(args, "no_pcsc", False),
        pcscd=getattr(args, "pcscd", None),
    )
    print(render(serial_ports, usb, note))
    heard = _mqtt_readers(args) if getattr(args, "mqtt_readers", None) else 0
    sys.stdout.flush()
    return 0 if serial_ports or usb or heard else 1


def _mqtt_readers(args: argparse.Namespace) -> int:
    """List the MQTT tag readers heard on ``--mqtt-readers``; how many were heard."""
    import asyncio

    from controller.errors import ConfigError
    from drivers.errors import DriverError
    from drivers.json_readers import MqttReaderSpec
    from drivers.mqtt_discovery import listen_for_readers, render_readers
    from drivers.source import parse_url

    try:
        spec = parse_url(args.mqtt_readers)
    except DriverError as exc:
        raise ConfigError(str(exc), field="--mqtt-readers") from exc
    if not isinstance(spec, MqttReaderSpec):
        raise ConfigError(
            "--mqtt-readers takes mqtt-reader://HOST[:PORT]/TOPIC (a wildcard is %23)",
            field="--mqtt-readers",
        )
    try:
        survey = asyncio.run(listen_for_readers(spec, args.listen))
    except DriverError as exc:
        print(f"FAIL  {spec.device}: {exc}")
        return 0
    print("\n".join(render_readers(survey, spec.device, args.listen)))
    return len(survey.readers)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``devices`` sub-command."""
    parser = subparsers.add_parser(
        "devices",
        help="list serial ports, USB devices and PC/SC readers that look like card scanners",
        description="List serial ports, USB card scanners and PC/SC contactless readers (by "
        "name, from pcscd), with the URL to put in the table config's [device] url.",
    )
    parser.add_argument(
        "--known-only", action="store_true", help="only devices recognised as scanners"
    )
    parser.add_argument("--usb-only", action="store_true", help="skip serial ports")
    parser.add_argument(
        "--no-pcsc", action="store_true", help="do not ask pcscd for PC/SC contactless readers"
    )
    parser.add_argument(
        "--pcscd",
        default=None,
        metavar="SOCKET",
        help="the pcscd socket to ask for PC/SC readers (default: the system's)",
    )
    parser.add_argument(
        "--mqtt-readers",
        metavar="URL",
        default=None,
        help="also list the MQTT tag readers (ESP32/M5Stack) heard on a broker's topic filter: "
        "mqtt-reader://HOST[:PORT]/TOPIC (write # as %%23), each with its URL",
    )
    parser.add_argument(
        "--listen",
        type=float,
        default=3.0,
        metavar="S",
        help="seconds to listen for MQTT readers (default 3; a reader publishes while a tag "
        "lies on it)",
    )
    parser.set_defaults(func=run)
