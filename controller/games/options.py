"""The base of every game's live options (pydantic; imported by the games' ``live`` modules)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class GameOptions(BaseModel):
    """Base of every game's live options: unknown keys are errors, the options are frozen.

    Every field has a default that makes a good demo, so ``{}`` is a valid table.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


__all__ = ["GameOptions"]
