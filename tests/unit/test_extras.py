"""The install's extras (controller/extras.py): which extra a missing module belongs to.

The commands' messages with the extras really absent are tested in
tests/integration/test_lean_install.py (a subprocess with the modules blocked).
"""

from __future__ import annotations

import pytest

from controller.errors import TablectlError
from controller.extras import EXTRAS, MissingExtra, missing_extra, missing_modules, require


@pytest.mark.parametrize(
    ("module", "extra"),
    [
        ("starlette", "studio"),
        ("starlette.routing", "studio"),
        ("uvicorn", "studio"),
        ("psycopg", "archive"),
        ("psycopg.types.json", "archive"),
        ("orjson", "archive"),
        ("nacl.signing", "archive"),
    ],
)
def test_a_missing_module_names_its_extra_and_the_install_line(module: str, extra: str) -> None:
    found = missing_extra(ModuleNotFoundError(f"No module named {module!r}", name=module))
    assert isinstance(found, MissingExtra)
    assert isinstance(found, TablectlError)
    assert found.extra == extra
    assert found.module == module.split(".", maxsplit=1)[0]
    assert f"pip install 'tablectl[{extra}]'" in str(found)
    assert f"{extra} extra" in str(found)


@pytest.mark.parametrize("module", ["numpy", "pydantic", "", None, "starlettex"])
def test_a_module_of_no_extra_is_not_an_extra(module: str | None) -> None:
    assert missing_extra(ModuleNotFoundError("No module", name=module)) is None


def test_installed_extras_are_found_and_an_absent_module_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The dev install has both extras.
    assert missing_modules("studio") == []
    assert missing_modules("archive") == []
    require("studio")
    monkeypatch.setitem(__import__("sys").modules, "uvicorn", None)
    assert missing_modules("studio") == ["uvicorn"]
    with pytest.raises(MissingExtra) as caught:
        require("studio")
    assert caught.value.module == "uvicorn"
    assert "tablectl[studio]" in str(caught.value)


def test_the_extras_match_the_package_metadata() -> None:
    from importlib.metadata import requires

    declared = requires("tablectl") or []
    by_extra: dict[str, set[str]] = {}
    for requirement in declared:
        name, _, marker = requirement.partition(";")
        if "extra ==" in marker:
            extra = marker.split("extra ==")[1].strip().strip("'\"")
            base = name.strip().split("[")[0]
            for cut in "<>=!~ ":
                base = base.split(cut)[0]
            by_extra.setdefault(extra, set()).add(base.lower())
    modules_of = {"pynacl": "nacl", "psycopg": "psycopg"}
    for extra, modules in EXTRAS.items():
        installed = {modules_of.get(name, name) for name in by_extra.get(extra, set())}
        assert set(modules) <= installed, (extra, by_extra.get(extra))
