"""Device profiles: the checksums, the line codec, the load's refusals, the shipped data."""

from __future__ import annotations

import functools
import operator
from pathlib import Path

import pytest

from drivers.errors import UnsupportedUrl
from drivers.profile import (
    CHECKSUMS,
    LineDecoder,
    ProfileError,
    checksum,
    load_code_table,
    load_profile,
    render_record,
    shipped_profiles,
)
from drivers.source import CardRead, DeviceStatus, Misread, ProfileSpec, open_card_source, parse_url

CHECK_INPUT = b"123456789"
CRC_CATALOGUE = {  # the "check" values of the CRC RevEng catalogue, for b"123456789"
    "crc16-ccitt-false": 0x29B1,
    "crc16-xmodem": 0x31C3,
    "crc16-arc": 0xBB3D,
    "crc16-modbus": 0x4B37,
    "crc16-kermit": 0x2189,
}

PATTERN = (
    "(?P<payload>P(?P<position>[A-Z0-9]+):(?P<code>[0-9A-F]{2})|!(?P<status>[A-Z]+))"
    "\\\\*(?P<checksum>[0-9A-F]{4})"
)
SHOE = (
    """
name = "test-shoe"
terminator = "CR"
pattern = "PATTERN"
checksum = "crc16-modbus"
misread_status = ["NR"]

[records]
card = "P{position}:{code}*{checksum}"
status = "!{status}*{checksum}"

[codes]
"11" = "As"
"2D" = "Kh"
"""
).replace('"PATTERN"', f'"{PATTERN}"')


def write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", sorted(CRC_CATALOGUE))
def test_crc16_catalogue_check_values(kind: str) -> None:
    assert checksum(kind, CHECK_INPUT) == f"{CRC_CATALOGUE[kind]:04X}"


def test_xor_and_sum_by_their_definition() -> None:
    data = b"PS1:2D"
    assert checksum("xor8", data) == f"{functools.reduce(operator.xor, data):02X}"
    assert checksum("sum8", data) == f"{sum(data) & 0xFF:02X}"
    assert set(CHECKSUMS) == {*CRC_CATALOGUE, "xor8", "sum8"}


def test_decoder_reads_cards_statuses_and_refusals(tmp_path: Path) -> None:
    loaded = load_profile(str(write(tmp_path, SHOE)))
    profile = loaded.profile
    good = render_record(profile, profile.records.card, code="2D", position="S3")
    no_read = render_record(profile, profile.records.status or "", status="NR")
    empty = render_record(profile, profile.records.status or "", status="EMPTY")
    bad_sum = good[:-2] + (b"0" if good[-2:-1] != b"0" else b"1") + b"\r"
    unknown = render_record(profile, profile.records.card, code="99", position="S3")
    decoder = LineDecoder(profile, loaded.table)
    stream = good + no_read + empty + bad_sum + unknown + b"hello\r" + b"\r"
    reads = [
        read
        for index in range(len(stream))
        for read in decoder.feed(stream[index : index + 1], 1.0)
    ]
    assert reads[0] == CardRead("Kh", "S3", 0, 1.0)
    assert isinstance(reads[1], Misread) and reads[1].cause == "device"
    assert isinstance(reads[2], DeviceStatus) and reads[2].state == "empty"
    assert [r.cause for r in reads[3:] if isinstance(r, Misread)] == [
        "checksum",
        "unknown_code",
        "line",
    ]
    assert "'99'" in reads[4].detail if isinstance(reads[4], Misread) else False
    assert len(reads) == 6  # an empty line is no record


def test_noise_without_terminator_is_a_misread(tmp_path: Path) -> None:
    loaded = load_profile(str(write(tmp_path, SHOE)))
    decoder = LineDecoder(loaded.profile, loaded.table)
    reads = decoder.feed(b"x" * 300, 2.0)
    assert [type(r) for r in reads] == [Misread] and reads[0].cause == "line"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ("name = [", "", "not valid TOML"),
        (SHOE.replace('terminator = "CR"', 'terminator = "CRCR"'), "terminator", "terminator is"),
        (SHOE.replace("(?P<code>", "(?P<code"), "pattern", "not a regular expression"),
        (SHOE.replace("(?P<code>", "(?P<cod>"), "pattern", "unknown named group"),
        (
            SHOE.replace('checksum = "crc16-modbus"', 'checksum = "md5"'),
            "checksum",
            "Input should be",
        ),
        (SHOE.replace('"2D" = "Kh"', '"2D" = "As"'), "codes", "two codes"),
        ('code_table = "x.toml"\n' + SHOE, "codes", "give the code table once"),
        (
            SHOE.replace('card = "P{position}:{code}*{checksum}"', 'card = "{code}"'),
            "records.card",
            "does not match",
        ),
        (
            SHOE.replace("\\*(?P<checksum>[0-9A-F]{4})", "\\*[0-9A-F]{4}"),
            "pattern",
            "no 'checksum' group",
        ),
    ],
)
def test_bad_profiles_name_file_field_and_reason(
    tmp_path: Path, text: str, field: str, reason: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as caught:
        load_profile(str(path))
    message = str(caught.value)
    assert str(path) in message
    assert reason in message
    if field:
        assert caught.value.context.get("field", "").startswith(field) or field in message


def test_code_table_given_twice_or_never(tmp_path: Path) -> None:
    without = SHOE[: SHOE.index("[codes]")]
    with pytest.raises(ProfileError, match="give the code table once"):
        load_profile(str(write(tmp_path, without)))
    write(tmp_path, 'name = "t"\n[codes]\n"11" = "As"\n"22" = "As"\n', "codes.toml")
    with pytest.raises(ProfileError, match="two codes") as caught:
        load_profile(str(write(tmp_path, 'code_table = "codes.toml"\n' + without)))
    assert "codes.toml" in str(caught.value)


def test_shipped_profiles_load_and_their_tables_are_full_decks() -> None:
    assert {"line-shoe", "barcode-crlf"} <= set(shipped_profiles())
    for name in shipped_profiles():
        loaded = load_profile(name)
        assert len(set(loaded.table.codes.values())) == 53  # 52 cards and the joker


def test_shipped_ean13_codes_carry_their_check_digit() -> None:
    table = load_profile("barcode-crlf").table
    for code in table.codes:
        digits = [int(char) for char in code]
        weighted = sum(d * (3 if i % 2 else 1) for i, d in enumerate(digits[:12]))
        assert (10 - weighted % 10) % 10 == digits[12], code
    assert (
        load_code_table(load_profile("barcode-crlf").path.parent / "codes/ean13-standard.toml")
        == table
    )


def test_profile_urls() -> None:
    spec = parse_url("profile+serial:///dev/ttyUSB0?profile=line-shoe&baud=9600")
    assert spec == ProfileSpec("/dev/ttyUSB0", "/dev/ttyUSB0", 9600, "line-shoe")
    for bad, reason in [
        ("profile+serial:///dev/ttyUSB0", "needs [?]profile"),
        ("profile+serial:///dev/ttyUSB0?profile=x&parity=E", "unknown option"),
        ("profile+serial://host/dev/ttyUSB0?profile=x", "device path"),
    ]:
        with pytest.raises(UnsupportedUrl, match=reason):
            parse_url(bad)


def test_unknown_profile_is_refused_when_the_source_is_built() -> None:
    with pytest.raises(ProfileError, match="no shipped device profile") as caught:
        open_card_source("profile+serial:///dev/null?profile=no-such-device")
    assert "line-shoe" in str(caught.value)


def test_the_worked_example_in_the_docs_loads_and_reads(tmp_path: Path) -> None:
    docs = (Path(__file__).parents[2] / "docs" / "drivers.md").read_text(encoding="utf-8")
    section = docs[docs.index("### Writing a profile: a worked example") :]
    example = section[
        section.index("```toml\n") + 8 : section.index("```\n", section.index("```toml"))
    ]
    loaded = load_profile(str(write(tmp_path, example, "acme-cs2.toml")))
    decoder = LineDecoder(loaded.profile, loaded.table)
    body = "#3|0C"
    record = f"{body}|{sum(body.encode()) % 256:02X}\r\n".encode()
    assert decoder.feed(record + b"#3|ERR|00\r\n", 0.0)[0] == CardRead("As", "3", 0, 0.0)
    assert loaded.profile.command("rescan") == b"B\r\n"


def test_a_code_table_has_one_code_a_card_or_its_copies() -> None:
    from pydantic import ValidationError

    from drivers.profile import CodeTable

    with pytest.raises(ValidationError, match=r"card '1p' has two codes: 'A' and 'B'"):
        CodeTable(name="t", codes={"A": "1p", "B": "1p"})
    tiles = CodeTable(name="t", codes={"A": "1p", "B": "1p", "C": "2p"}, codes_per_card=2)
    assert tiles.codes_of("1p") == ["A", "B"] and tiles.code_of("1p", 1) == "B"
    with pytest.raises(
        ValidationError, match=r"has 3 codes \('A', 'B', 'C'\); codes_per_card is 2"
    ):
        CodeTable(name="t", codes={"A": "1p", "B": "1p", "C": "1p"}, codes_per_card=2)


def test_a_profile_url_may_name_an_enrolled_deck(tmp_path: Path) -> None:
    from drivers.errors import UnsupportedUrl
    from drivers.source import ProfileSpec, parse_url

    spec = parse_url(
        "profile+serial:///dev/ttyACM0?profile=rfid-ntag&codes=codes/rfid-demo-tiles.toml"
    )
    assert isinstance(spec, ProfileSpec) and spec.codes == "codes/rfid-demo-tiles.toml"
    loaded = load_profile(spec.profile, spec.codes)
    assert loaded.table.name == "rfid-demo-tiles" and loaded.table.codes_per_card == 2
    with pytest.raises(UnsupportedUrl, match="codes option"):
        parse_url("profile+serial:///dev/ttyACM0?profile=rfid-ntag&codes=")
    bad = tmp_path / "deck.toml"
    bad.write_text('name = "x"\n[codes]\n"zz" = "As"\n')  # not a UID the pattern reads
    with pytest.raises(ProfileError, match=r"records\.card"):
        load_profile("rfid-ntag", str(bad))


def test_a_hid_url_may_name_an_enrolled_deck_and_a_bad_one_stops_the_config() -> None:
    from controller.errors import ConfigError
    from controller.settings import load_settings
    from drivers.hid import HidSpec

    spec = parse_url("hidpos://05e0:1200?profile=barcode-crlf&codes=codes/ean13-standard.toml")
    assert isinstance(spec, HidSpec) and spec.codes == "codes/ean13-standard.toml"
    with pytest.raises(ConfigError, match=r"no shipped device profile") as caught:
        load_settings(None, table_id="t", device={"url": "hidkbd://05e0:1200?profile=nope"})
    assert caught.value.context["field"] == "device.url"
