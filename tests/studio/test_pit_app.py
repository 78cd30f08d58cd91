"""The pit console's HTTP side through Starlette's TestClient: sign-in, sessions, tokens.

No broker here (the app's lifespan, which connects, is not run): the floor is empty and a pit
action says plainly that it was not sent. The browser and broker tests are in
``test_pit_browser.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from controller.studio.pit import PitSettings, build_pit_app
from controller.studio.pit.errors import PitConfigError
from controller.studio.pit.passwords import hash_password
from controller.studio.pit.settings import load_pit_settings, pit_settings

ROOT = Path(__file__).resolve().parents[2]
FAST = {"n": 2**10, "r": 8, "p": 1}
SECRET = "x" * 40


def settings(**overrides) -> PitSettings:
    data = {
        "users": [
            {"name": "alice", "role": "pitboss", "password_hash": hash_password("pw-a", **FAST)},
            {"name": "sam", "role": "observer", "password_hash": hash_password("pw-s", **FAST)},
        ],
        "session_secret": SECRET,
        "mqtt": {"urls": ["mqtt://127.0.0.1:1"]},
        "tables": ["tp-01"],
        "login": {"failure_delay_seconds": 0, "max_failures": 3, "lockout_seconds": 60},
        **overrides,
    }
    return pit_settings(data)


def csrf_of(page: str) -> str:
    found = re.search(r'name=csrf value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def sign_in(client: TestClient, user: str, password: str, prefix: str = ""):
    form = client.get(f"{prefix}/login")
    return client.post(
        f"{prefix}/login",
        data={"username": user, "password": password, "csrf": csrf_of(form.text)},
        follow_redirects=False,
    )


@pytest.fixture
def client():
    return TestClient(build_pit_app(settings()), base_url="http://testserver")


def test_the_floor_needs_a_sign_in(client):
    answer = client.get("/", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/login"


def test_a_wrong_sign_in_is_shown_plainly_and_repeated_ones_lock(client):
    answer = sign_in(client, "alice", "wrong")
    assert answer.status_code == 401
    assert "wrong user name or password" in answer.text
    assert 'value="alice"' in answer.text, "the name is kept in the form"
    assert sign_in(client, "nobody", "x").status_code == 401, "unknown name: the same answer"
    sign_in(client, "alice", "wrong")
    locked = sign_in(client, "alice", "pw-a")
    assert locked.status_code == 429
    assert "too many wrong sign-ins" in locked.text


def test_a_sign_in_without_the_form_token_is_refused(client):
    client.get("/login")
    answer = client.post("/login", data={"username": "alice", "password": "pw-a", "csrf": "forged"})
    assert answer.status_code == 403 and "expired" in answer.text


def test_a_right_sign_in_opens_the_floor_with_a_strict_cookie(client):
    answer = sign_in(client, "alice", "pw-a")
    assert answer.status_code == 303 and answer.headers["location"] == "/"
    cookie = answer.headers["set-cookie"].lower()
    assert "samesite=strict" in cookie and "httponly" in cookie
    page = client.get("/")
    assert page.status_code == 200 and "alice (pitboss)" in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert client.get("/pit.js").headers["content-type"].startswith("text/javascript")


def test_sign_out_needs_the_session_token(client):
    sign_in(client, "alice", "pw-a")
    client.post("/logout", data={"csrf": "forged"})
    assert client.get("/", follow_redirects=False).status_code == 200, "still signed in"
    token = csrf_of(client.get("/").text)
    client.post("/logout", data={"csrf": token})
    assert client.get("/", follow_redirects=False).status_code == 303


def test_the_websocket_needs_a_session_and_this_origin(client):
    with client.websocket_connect("/ws") as ws, pytest.raises(WebSocketDisconnect) as refused:
        ws.receive_json()
    assert (refused.value.code, refused.value.reason) == (4401, "not signed in")
    sign_in(client, "alice", "pw-a")
    with (
        pytest.raises(WebSocketDisconnect),
        client.websocket_connect("/ws", headers={"origin": "http://evil.test"}),
    ):
        pass
    with client.websocket_connect("/ws", headers={"origin": "http://testserver"}) as ws:
        first = ws.receive_json()
        assert first["type"] == "snapshot"
        assert [t["table"] for t in first["floor"]["tables"]] == ["tp-01"]
        assert first["floor"]["broker"] is False


def _action(ws, csrf: str, **extra):
    ws.send_json(
        {"type": "action", "csrf": csrf, "table": "tp-01", "name": "resume", "nonce": "n" * 12}
        | extra
    )
    while True:
        message = ws.receive_json()
        if message["type"] == "answer":
            return message


def test_actions_need_the_token_the_role_and_a_connection(client):
    sign_in(client, "alice", "pw-a")
    token = csrf_of(client.get("/").text)
    with client.websocket_connect("/ws") as ws:
        assert _action(ws, "forged")["text"] == "the page's token is wrong: reload"
        invalid = _action(ws, token, name="void", reason="  ")
        assert (invalid["status"], invalid["text"]) == ("invalid", "a void needs a reason")
        unknown = _action(ws, token, table="tp-99")
        assert unknown["text"] == "unknown table 'tp-99'"
        down = _action(ws, token)
        assert down["status"] == "no_answer"
        assert down["text"].startswith("NOT SENT: the console is not connected to the broker")
        assert down["command_id"] == "resume-alice-nnnnnnnnnnnn"
    client.post("/logout", data={"csrf": token})
    sign_in(client, "sam", "pw-s")
    token = csrf_of(client.get("/").text)
    with client.websocket_connect("/ws") as ws:
        assert _action(ws, token)["text"] == "observer may not send pit actions"


def test_recall_without_the_archive_says_so(client):
    sign_in(client, "sam", "pw-s")
    with client.websocket_connect("/ws") as ws:
        ws.receive_json()
        ws.send_json({"type": "recall", "round": "tp-01-000042"})
        answer = ws.receive_json()
    assert answer["type"] == "recall_error"
    assert "not seen by this console" in answer["text"] and "studio archive" in answer["text"]


def test_mounted_at_pit_every_link_is_under_pit():
    studio = Starlette(routes=[Mount("/pit", app=build_pit_app(settings()))])
    client = TestClient(studio, base_url="http://testserver")
    assert client.get("/pit/", follow_redirects=False).headers["location"] == "/pit/login"
    form = client.get("/pit/login").text
    assert 'action="/pit/login"' in form and '<base href="/pit/">' in form
    answer = sign_in(client, "alice", "pw-a", prefix="/pit")
    assert answer.headers["location"] == "/pit/"
    assert "alice (pitboss)" in client.get("/pit/").text


def test_settings_errors_name_the_field(tmp_path):
    with pytest.raises(PitConfigError, match="session_secret"):
        settings(session_secret="short")
    with pytest.raises(PitConfigError, match="at least one user must have the role 'pitboss'"):
        settings(users=[{"name": "sam", "role": "observer", "password_hash": hash_password("x")}])
    with pytest.raises(PitConfigError, match=r"users\.0\.password_hash"):
        settings(users=[{"name": "a", "role": "pitboss", "password_hash": "plain"}])
    with pytest.raises(PitConfigError, match="one topic level"):
        settings(tables=["tp/01"])
    file = tmp_path / "studio.toml"
    file.write_text("[pit]\nsession_secret = 3\n")
    with pytest.raises(PitConfigError, match=str(file)):
        load_pit_settings(file, section="pit")
    with pytest.raises(PitConfigError, match=r"has no \[other\] table"):
        load_pit_settings(file, section="other")


def test_the_example_config_loads_once_its_placeholders_are_replaced(tmp_path):
    example = (ROOT / "config" / "studio-pit-example.toml").read_text()
    written = tmp_path / "as-shipped.toml"
    written.write_text(example)
    with pytest.raises(PitConfigError, match="session_secret"):
        load_pit_settings(written, section="pit")
    filled = example.replace('session_secret = "REPLACE"', f'session_secret = "{SECRET}"')
    written.write_text(filled)
    with pytest.raises(PitConfigError, match=r"users\.0\.password_hash"):
        load_pit_settings(written, section="pit")
    stored = hash_password("pw", **FAST)
    filled = filled.replace("REPLACE: tablectl studio --hash-password", stored)
    written.write_text(filled)
    loaded = load_pit_settings(written, section="pit")
    assert [(u.name, u.role) for u in loaded.users] == [("alice", "pitboss"), ("sam", "observer")]
    assert loaded.tables == ["tp-01", "tp-02"] and loaded.https_only
    assert loaded.mqtt.urls == ["mqtts://broker.studio:8883"]


def test_the_example_configs_commented_guard_settings_load_when_uncommented(tmp_path):
    example = (ROOT / "config" / "studio-pit-example.toml").read_text()
    stored = hash_password("pw", **FAST)
    filled = example.replace('session_secret = "REPLACE"', f'session_secret = "{SECRET}"')
    filled = filled.replace("REPLACE: tablectl studio --hash-password", stored)
    settings_lines = (
        "trusted_proxies",
        "proxy_header",
        "window_seconds",
        "max_failures_per_user",
        "[pit.sockets]",
        "per_address",
        "total",
    )
    lines = [
        line[2:] if line.startswith("# ") and line[2:].startswith(settings_lines) else line
        for line in filled.splitlines()
    ]
    written = tmp_path / "uncommented.toml"
    written.write_text("\n".join(lines) + "\n")
    loaded = load_pit_settings(written, section="pit")
    assert loaded.trusted_proxies == ["127.0.0.1"] and loaded.proxy_header == "x-forwarded-for"
    assert (loaded.login.window_seconds, loaded.login.max_failures_per_user) == (900.0, 50)
    assert (loaded.sockets.per_address, loaded.sockets.total) == (8, 64)
    with pytest.raises(PitConfigError, match=r"trusted_proxies.*not an IP address or network"):
        settings(trusted_proxies=["proxy.studio"])
