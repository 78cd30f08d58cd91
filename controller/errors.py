"""The controller's exception tree.

Every exception the controller raises on purpose derives from :class:`TablectlError` and
carries the context needed to say *what* was wrong and *where* as attributes, so a log line
or an MQTT refusal can be built from the exception alone.
"""

from __future__ import annotations

from typing import Any


class TablectlError(Exception):
    """Root of the controller's exceptions.

    Args:
        message: A human sentence saying what was wrong.
        **context: Where and with what (table id, round id, slot, value, field, ...).
    """

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, Any] = context

    def __str__(self) -> str:
        if not self.context:
            return self.message
        where = ", ".join(f"{key}={value!r}" for key, value in self.context.items())
        return f"{self.message} ({where})"


class NotationError(TablectlError, ValueError):
    """A card or tile written in a notation we do not accept (e.g. ``"1s"``, ``"10h"``)."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"cannot read {text!r}: {reason}", text=text, reason=reason)
        self.text = text
        self.reason = reason


class PieceRefused(TablectlError):
    """A well-formed card or tile that cannot be in this round (wrong deck, duplicate, ...)."""

    def __init__(self, piece: str, reason: str, **context: Any) -> None:
        super().__init__(f"{piece} refused: {reason}", piece=piece, reason=reason, **context)
        self.piece = piece
        self.reason = reason


class RulesError(TablectlError):
    """Rules were asked something that has no answer (wrong number of cards, unknown bet)."""


class IllegalAction(RulesError):
    """A player or dealer action that is not legal in the current state; nothing changed."""

    def __init__(self, action: str, reason: str, **context: Any) -> None:
        super().__init__(f"{action} refused: {reason}", action=action, reason=reason, **context)
        self.action = action
        self.reason = reason


class PayTableError(TablectlError, ValueError):
    """A pay table (default or from config) that is malformed or names unknown outcomes."""


class ConfigError(TablectlError):
    """A table config that cannot be used; ``context`` names the file and field."""


class JournalError(TablectlError):
    """The journal cannot be read or written, or is inconsistent."""


class PublishError(TablectlError):
    """A message could not be delivered to the broker (refused, timed out, disconnected)."""
