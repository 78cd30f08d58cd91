"""What every route of the studio and the pit console shares: the static files, clean paths.

A module of its own so the pit console (:mod:`controller.studio.pit.app`, mounted by
:mod:`controller.studio.web`) uses them without importing the studio's app.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import structlog
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

log = structlog.get_logger("studio")

STATIC = Path(str(resources.files("controller.studio") / "static"))
"""The pages, scripts and styles (package data)."""


def bad_path(path: str) -> str | None:
    """What is wrong with a request's (decoded) path, or ``None``: control characters."""
    for index, char in enumerate(path):
        if ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 or 0xD800 <= ord(char) <= 0xDFFF:
            return f"the path holds a control character (U+{ord(char):04X} at {index})"
    return None


class CleanPaths:
    """Answers 400 (a socket: refuses it) for a path with a control character, on any route.

    A ``%00`` reached the static files' ``os.stat`` and gave a 500 with a traceback; no route
    of the studio (nor the pit console) has a use for such a path.

    Args:
        app: The app behind.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request when its path is bad, else hand it on."""
        if scope["type"] in ("http", "websocket"):
            wrong = bad_path(str(scope.get("path", "")))
            if wrong is not None:
                log.info("request refused", reason=wrong, kind=scope["type"])
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008, "reason": wrong})
                else:
                    await PlainTextResponse(wrong, status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)
