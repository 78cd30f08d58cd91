"""The optional parts of an install: ``tablectl[studio]`` and ``tablectl[archive]``.

A table computer installs ``tablectl`` alone: the table, its journal, its devices and MQTT,
the simulators and the par sheets. The studio's web service and the archive bring heavier
dependencies and are extras (docs/operations.md, "Installing"):

* ``studio``: starlette, uvicorn, websockets, itsdangerous (``tablectl studio``, the studio
  beside ``tablectl run --simulate``);
* ``archive``: psycopg, orjson, pynacl (``tablectl archive ...``, ``tablectl recall
  --archive``, the archive beside ``tablectl run --simulate``).

A command that needs an extra that is not installed ends with :class:`MissingExtra`, which
names the extra and the line that installs it, instead of an ``ImportError`` traceback.
"""

from __future__ import annotations

import importlib.util
from typing import Final

from controller.errors import TablectlError

EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "studio": ("starlette", "uvicorn", "websockets", "itsdangerous"),
    "archive": ("psycopg", "orjson", "nacl"),
}
"""Each extra and the top-level modules it installs (``nacl`` is pynacl's)."""

_EXTRA_OF: Final = {module: extra for extra, modules in EXTRAS.items() for module in modules}


class MissingExtra(TablectlError):
    """A command needs an extra of tablectl that is not installed.

    Args:
        extra: The extra (``studio`` or ``archive``).
        module: The module that could not be imported.
    """

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(
            f"this needs tablectl's {extra} extra, which is not installed (no module "
            f"{module!r}): pip install 'tablectl[{extra}]'",
        )
        self.extra = extra
        self.module = module


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (empty: the extra is installed).

    Raises:
        KeyError: ``extra`` is not one of :data:`EXTRAS`.
    """
    missing = []
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # blocked, or a None placeholder in sys.modules
            found = False
        if not found:
            missing.append(module)
    return missing


def require(extra: str) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` can be imported."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(extra, missing[0])


def missing_extra(exc: ImportError) -> MissingExtra | None:
    """The extra an ``ImportError`` shows missing, or ``None`` when it is not an extra's module.

    Args:
        exc: An import that failed; its ``name`` is the module that was not found.
    """
    name = exc.name or ""
    extra = _EXTRA_OF.get(name.split(".")[0])
    return MissingExtra(extra, name.split(".")[0]) if extra is not None else None
