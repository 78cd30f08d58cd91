"""An option the sub-command does not take is reported with that sub-command's usage."""

from __future__ import annotations

import pytest

from controller.cli import main


def test_pit_resume_refuses_reason_with_its_own_usage(capsys):
    with pytest.raises(SystemExit) as info:
        main(["pit", "resume", "--reason", "scanner replaced", "--table-id", "t1"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: tablectl pit resume ")
    assert "tablectl pit resume: error: unrecognized arguments: --reason scanner replaced" in err


def test_pit_void_takes_a_reason(capsys):
    with pytest.raises(SystemExit):
        main(["pit", "void", "--table-id", "t1"])
    assert "the following arguments are required: --reason" in capsys.readouterr().err


def test_keygen_needs_out(capsys):
    with pytest.raises(SystemExit):
        main(["keygen"])
    err = capsys.readouterr().err
    assert err.startswith("usage: tablectl keygen ")
    assert "--out" in err
