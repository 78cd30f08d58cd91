"""``tablectl simulate-scanner --profile``: what it plays, and the options it refuses.

Pure: each command returns before any pty, socket or broker is opened.
"""

from __future__ import annotations

import pytest

from drivers.profile import shipped_profiles
from drivers.reader_profile import shipped_reader_profiles
from simulators.cli import LINE_PROFILES, READER_PROFILES, main, playable_profiles


def _stderr_of(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["simulate-scanner", *argv])
    return code, capsys.readouterr().err


def test_every_shipped_profile_can_be_played() -> None:
    lines, readers = playable_profiles()
    assert lines == shipped_profiles() == sorted(LINE_PROFILES)
    assert readers == shipped_reader_profiles() == sorted(READER_PROFILES)


def test_an_unknown_profile_is_named_with_every_profile_it_could_be(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = _stderr_of(capsys, "--profile", "pepper-c9", "--pty")
    assert code == 2
    assert "no profile of that name to simulate" in err
    assert "profile='pepper-c9'" in err
    assert f"line_profiles='{', '.join(shipped_profiles())}'" in err
    assert f"reader_profiles='{', '.join(shipped_reader_profiles())}'" in err


def test_the_help_names_every_profile(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["simulate-scanner", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in [*shipped_profiles(), *shipped_reader_profiles()]:
        assert name in text, name
    assert "--broker URL" in text and "--topic T" in text


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--profile", "pepper-c1", "--broker", "mqtt://127.0.0.1:1"], "are for mqtt-json"),
        (["--profile", "line-shoe", "--topic", "a/b"], "are for mqtt-json"),
        (["--profile", "mqtt-json", "--tcp", "0"], "not TCP"),
        (["--profile", "mqtt-json", "--pty", "--broker", "mqtt://127.0.0.1:1"], "not both"),
        (["--profile", "mqtt-json", "--pty", "--topic", "a/b"], "--topic needs --broker"),
        (["--profile", "pepper-c1", "--misread-rate", "0.1"], "drop --misread-rate"),
        (
            ["--profile", "pepper-c1", "--repeat-rate", "0.1", "--unplug-every", "3"],
            "drop --repeat-rate, --unplug-every",
        ),
        (["--profile", "pepper-c1", "--interval", "1"], "drop --interval"),
        (
            ["--profile", "mqtt-json", "--broker", "mqtt://127.0.0.1:1", "--topic", "t/+"],
            "without wildcards",
        ),
        (
            ["--profile", "mqtt-json", "--broker", "mqtt://127.0.0.1:1", "--topic", "seat-3"],
            "PREFIX/NAME",
        ),
        (["--profile", "mqtt-json", "--broker", "mqtts://127.0.0.1:1"], "no TLS"),
        (["--profile", "mqtt-json", "--broker", "http://127.0.0.1"], "--broker"),
        (["--profile", "pepper-c1", "--cards", "As Zz"], "card='Zz'"),
    ],
)
def test_options_that_do_not_fit_are_refused_with_the_reason(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _stderr_of(capsys, *argv)
    assert code == 2, err
    assert said in err, err
