"""The pit-boss console of ``tablectl studio`` (issue #14 part B), a Starlette sub-application.

* :func:`build_pit_app` (:mod:`.app`): the app to mount at ``/pit``.
* :class:`PitSettings` (:mod:`.settings`): users, session secret, broker, tables, timeouts.
* :class:`PitConsole` (:mod:`.console`): one MQTT connection feeding the floor; pit actions.
* :class:`Floor` (:mod:`.floor`): the floor model (pure).
* :func:`hash_password` (:mod:`.passwords`): scrypt hashes for the config.
* :func:`serving` (:mod:`.runner`): the app alone on uvicorn (tests).

``docs/studio-pit.md`` describes the console.
"""

from __future__ import annotations

from controller.studio.pit.app import build_pit_app
from controller.studio.pit.console import PitConsole
from controller.studio.pit.floor import Floor
from controller.studio.pit.passwords import hash_password, verify_password
from controller.studio.pit.settings import PitSettings, PitUser, load_pit_settings

__all__ = [
    "Floor",
    "PitConsole",
    "PitSettings",
    "PitUser",
    "build_pit_app",
    "hash_password",
    "load_pit_settings",
    "verify_password",
]
