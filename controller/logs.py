"""Logging set-up: structlog, JSON in production, readable in a terminal.

Every line is bound with the table id; round-scoped loggers add the round id. Tracebacks are
rendered without local variables, which could hold credentials.
"""

from __future__ import annotations

import io
import logging
import sys
from typing import Literal, TextIO, cast

import structlog
from structlog.tracebacks import ExceptionDictTransformer

LogFormat = Literal["auto", "json", "console"]


def configure_logging(
    *, level: str = "INFO", fmt: LogFormat = "auto", stream: TextIO | None = None
) -> None:
    """Configure structlog (and the standard library's root logger) once per process.

    Args:
        level: Minimum level name (``"DEBUG"``, ``"INFO"``, ``"WARNING"``...).
        fmt: ``"json"`` for production (one JSON object per line), ``"console"`` for people,
            ``"auto"`` to pick console when the stream is a terminal.
        stream: Where log lines go (default: standard error, as it is at each line).
    """
    # Standard error (given or by default) is followed as it is at each line, not kept.
    out: TextIO = cast("TextIO", _StandardError())
    if stream is not None and stream is not sys.stderr and stream is not sys.__stderr__:
        out = stream
    use_json = fmt == "json" or (fmt == "auto" and not out.isatty())
    numeric_level = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)

    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor
    if use_json:
        shared.append(
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
        )
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(
            colors=out.isatty(),
            exception_formatter=structlog.dev.RichTracebackFormatter(show_locals=False)
            if _has_rich()
            else structlog.dev.plain_traceback,
        )
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric_level, logging.WARNING), stream=out, force=True)
    # Libraries we embed are chatty at INFO; their warnings still come through.
    for noisy in ("amqtt", "transitions", "websockets", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.ERROR)


class _StandardError(io.TextIOBase):
    """Standard error as it is when a line is written, not as it was at configuration.

    A process that points ``sys.stderr`` elsewhere later (``contextlib.redirect_stderr``, a
    test's capture, a service manager's reopened stream) logs there, and never to a stream
    that was closed since (``ValueError: I/O operation on closed file``).
    """

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()

    def fileno(self) -> int:
        return sys.stderr.fileno()


def _has_rich() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True
