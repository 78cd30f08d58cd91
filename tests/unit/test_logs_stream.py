"""The log follows standard error as it is at each line (the suite's workers died of
``ValueError: I/O operation on closed file`` when a test's captured stream was kept)."""

from __future__ import annotations

import contextlib
import io
import sys

import structlog

from controller.logs import configure_logging


def test_a_line_goes_to_standard_error_as_it_is_when_written():
    first, second = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(first):
        configure_logging(level="INFO", fmt="json")
        structlog.get_logger("t").info("to the first")
    first.close()  # a test's capture, gone
    with contextlib.redirect_stderr(second):
        structlog.get_logger("t").info("to the second")
    assert '"event": "to the second"' in second.getvalue()


def test_a_stream_given_is_kept():
    given = io.StringIO()
    configure_logging(level="INFO", fmt="json", stream=given)
    with contextlib.redirect_stderr(io.StringIO()):
        structlog.get_logger("t").info("kept")
    assert '"event": "kept"' in given.getvalue()
    configure_logging(level="INFO", fmt="json")


def test_standard_error_given_by_name_is_followed_too():
    """``stream=sys.stderr`` (deck-check, the simulator) means standard error, as it is."""
    first, second = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(first):
        configure_logging(level="INFO", fmt="json", stream=sys.stderr)
    first.close()
    with contextlib.redirect_stderr(second):
        structlog.get_logger("t").info("followed")
    assert '"event": "followed"' in second.getvalue()
    configure_logging(level="INFO", fmt="json")
