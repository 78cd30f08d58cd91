"""``tablectl pit`` and ``replay`` without a config: ``run --simulate``'s defaults (issue 25)."""

from __future__ import annotations

from pathlib import Path

from controller.cli.pit import target_defaults


def test_without_a_config_the_local_broker_and_the_simulated_table():
    assert target_defaults(None, None, None) == (["mqtt://127.0.0.1:1883"], "sim-1")


def test_given_options_are_kept():
    brokers = ["mqtt://b:1883"]
    assert target_defaults(None, brokers, "tp-01") == (brokers, "tp-01")


def test_a_config_supplies_its_own():
    assert target_defaults(Path("t.toml"), None, None) == (None, None)


def test_watch_has_the_same_defaults():
    from controller.cli import build_parser

    args = build_parser("watch").parse_args(["watch"])
    assert (args.broker, args.table_id) == (None, "sim-1")  # None: the local broker, at run
