"""The overlay's branding (``[branding]`` in ``studio.toml``): checked at start, given to the page.

A wrong colour, a logo that is missing, too large or not an image file, or a control character
in the name stops the studio with the field and the reason; the overlay page carries the name
and colour as JSON that no name can break out of (``</script>``), and ``/branding/logo`` serves
the logo with its type (404 when none).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from controller.errors import ConfigError
from controller.studio.config import StudioSettings, studio_settings
from controller.studio.feed import Floor
from controller.studio.web import Floors, build_studio_app

EXAMPLE = Path(__file__).parents[2] / "config" / "studio-example.toml"


def settings(branding: dict[str, object]) -> StudioSettings:
    return studio_settings({"branding": branding, "tables": ["t1"]}, source="s.toml", environ={})


@pytest.mark.parametrize(
    ("branding", "field", "says"),
    [
        ({"colour": "red"}, "branding.colour", "pattern"),
        ({"colour": "#12345"}, "branding.colour", "pattern"),
        ({"name": "x" * 41}, "branding.name", "40"),
        ({"name": "Studio\x1b[2J"}, "branding.name", "control character"),
        ({"logo": "/nonexistent/logo.png"}, "branding.logo", "cannot be read"),
        ({"logo": "/etc/hostname.txt"}, "branding.logo", ".png"),
        ({"surprise": 1}, "branding.surprise", "Extra"),
    ],
)
def test_a_wrong_branding_names_its_field(branding, field, says):
    with pytest.raises(ConfigError) as caught:
        settings(branding)
    assert caught.value.context["field"] == field
    assert says in str(caught.value)


def test_a_logo_over_2_mb_is_refused(tmp_path):
    big = tmp_path / "logo.png"
    big.write_bytes(b"\x89PNG" + b"\0" * 2_000_001)
    with pytest.raises(ConfigError, match="at most 2 MB"):
        settings({"logo": str(big)})


def _app(config: StudioSettings) -> TestClient:
    floors = Floors(
        public=Floor(config.mqtt.topic_prefix, config.shows, name="public"),
        secure=None,
        stopping=asyncio.Event(),
    )
    return TestClient(build_studio_app(config, floors), base_url="http://127.0.0.1:8080")


def test_the_overlay_page_carries_the_branding_and_serves_the_logo(tmp_path):
    logo = tmp_path / "logo.svg"
    logo.write_text('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>')
    name = "</script><b>x"
    client = _app(settings({"name": name, "colour": "#c8102e", "logo": str(logo)}))
    page = client.get("/tables/t1/overlay").text
    found = re.search(r'<script type="application/json" id="branding">(.*?)</script>', page)
    assert found is not None
    assert json.loads(found.group(1)) == {"name": name, "colour": "#c8102e", "logo": True}
    assert "</script><b>" not in found.group(1)
    served = client.get("/branding/logo")
    assert served.status_code == 200 and served.headers["content-type"] == "image/svg+xml"
    assert served.text.startswith("<svg")


def test_no_branding_no_logo():
    client = _app(studio_settings({"tables": ["t1"]}, environ={}))
    page = client.get("/tables/t1/overlay").text
    assert '{"name": "", "colour": "#1a4d8f", "logo": false}' in page
    assert client.get("/branding/logo").status_code == 404


def test_the_example_names_a_brand():
    text = EXAMPLE.read_text()
    assert "[branding]" in text and 'colour = "#1a4d8f"' in text
