"""The PC/SC pieces that need no pcscd: the URL, the UID answer, reader names, vpcd framing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.errors import UnsupportedUrl
from drivers.pcsc_source import match_reader, parse_uid_response
from drivers.pcsc_url import PcscSpec
from drivers.reader_profile import load_reader_profile
from drivers.source import parse_url
from simulators.errors import SimulatorConfigError
from simulators.vpcd import ATR_ULTRALIGHT, GET_UID, VirtualTag, VpcdDecoder, encode_message


def test_a_pcsc_url_names_its_reader_codes_and_pcscd() -> None:
    spec = parse_url("pcsc://?reader=ACS%20ACR122U&codes=deck.toml&pcscd=/tmp/p/pcscd.comm")
    assert spec == PcscSpec(
        reader="ACS ACR122U",
        device="pcsc:ACS ACR122U",
        codes="deck.toml",
        pcscd="/tmp/p/pcscd.comm",
    )
    assert spec.profile == "pcsc-uid"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("pcsc://", "names its reader"),
        ("pcsc://?reader=", "reader option of a pcsc URL is empty"),
        ("pcsc://host/?reader=A", "no host or path"),
        ("pcsc://?reader=A&baud=9600", "unknown option"),
        ("pcsc://?reader=A&pcscd=relative.sock", "absolute path"),
        ("pcsc://?reader=A%0AB", "printable"),
    ],
)
def test_a_bad_pcsc_url_says_what_is_wrong(url: str, words: str) -> None:
    with pytest.raises(UnsupportedUrl, match=words) as caught:
        parse_url(url)
    assert caught.value.url == url


@given(st.text(max_size=300))
def test_any_query_is_a_spec_or_a_clear_error(query: str) -> None:
    error: UnsupportedUrl | None = None
    try:
        spec = parse_url("pcsc://?" + query)
    except UnsupportedUrl as exc:
        error = exc
    if error is not None:
        assert error.message
        assert error.url == "pcsc://?" + query
    else:
        assert isinstance(spec, PcscSpec)
        assert spec.reader


def test_the_uid_answer_is_read_only_when_it_is_one() -> None:
    assert parse_uid_response([0x04, 0xA2, 0xB3, 0xC4, 0xD5, 0xE6, 0xF7, 0x90, 0x00]) == (
        "04A2B3C4D5E6F7"
    )
    assert parse_uid_response([0xDE, 0xAD, 0xBE, 0xEF, 0x90, 0x00]) == "DEADBEEF"
    assert parse_uid_response([0x6A, 0x81]) is None  # an error status word
    assert parse_uid_response([1, 2, 3, 4, 5, 6, 7, 0x63, 0x00]) is None  # a warning
    assert parse_uid_response([1, 2, 3, 4, 5, 0x90, 0x00]) is None  # 5 bytes: no ISO UID
    assert parse_uid_response([1, 2, 3, 300, 0x90, 0x00]) is None


@given(st.lists(st.integers(min_value=-1000, max_value=1000), max_size=20))
def test_any_answer_is_a_uid_or_none(answer: list[int]) -> None:
    uid = parse_uid_response(answer)
    if uid is not None:
        assert len(uid) in (8, 14, 20)
        assert answer[-2:] == [0x90, 0x00]
        assert bytes.fromhex(uid) == bytes(answer[:-2])


def test_a_reader_is_found_by_its_name_its_first_slot_or_the_one_name_starting_so() -> None:
    readers = ["ACS ACR122U PICC Interface 00 00", "Identiv uTrust 3700 F 01 00", "X 00 00"]
    assert match_reader("Identiv uTrust 3700 F 01 00", readers) == readers[1]
    assert match_reader("X", readers) == "X 00 00"
    assert match_reader("ACS ACR122U", readers) == readers[0]
    assert match_reader("ACR1252", readers) is None
    two_slots = ["V 00 00", "V 00 01", "VV 00 00"]
    assert match_reader("V 00", two_slots) is None  # two start so: ambiguous


def test_vpcd_messages_round_trip_in_any_pieces() -> None:
    stream = encode_message(b"\x04") + encode_message(GET_UID) + encode_message(b"")
    decoder = VpcdDecoder()
    out: list[bytes] = []
    for byte in stream:
        out += decoder.feed(bytes([byte]))
    assert out == [b"\x04", GET_UID]
    assert decoder.pending == 0


@given(st.binary(max_size=600), st.integers(min_value=1, max_value=64))
def test_the_vpcd_decoder_survives_any_bytes(data: bytes, chunk: int) -> None:
    decoder = VpcdDecoder()
    messages: list[bytes] = []
    for start in range(0, len(data), chunk):
        messages += decoder.feed(data[start : start + chunk])
    consumed = sum(2 + len(message) for message in messages)
    assert consumed <= len(data)
    assert all(messages)
    assert decoder.pending <= len(data) - consumed


def test_the_virtual_tag_answers_as_a_pcsc_part_3_reader_does() -> None:
    tag = VirtualTag(bytes.fromhex("04A2B3C4D5E6F7"))
    assert tag.answer(b"\x04") == ATR_ULTRALIGHT
    assert tag.answer(b"\x01") is None
    assert tag.powered
    assert tag.answer(GET_UID) == bytes.fromhex("04A2B3C4D5E6F79000")
    assert tag.uid_reads == 1
    assert tag.answer(bytes.fromhex("FFCA010000")) == bytes.fromhex("6A81")  # no ATS
    assert tag.answer(bytes.fromhex("00A4040000")) == bytes.fromhex("6E00")
    assert tag.answer(bytes.fromhex("FFCA000004")) == bytes.fromhex("6C07")
    with pytest.raises(SimulatorConfigError, match="4, 7 or 10 bytes"):
        VirtualTag(b"\x01\x02")


@given(st.binary(min_size=1, max_size=300))
def test_the_virtual_tag_answers_any_message(message: bytes) -> None:
    tag = VirtualTag(bytes.fromhex("04A2B3C4D5E6F7"))
    answer = tag.answer(message)
    assert answer is None or len(answer) >= 2


def test_the_shipped_pcsc_profile_is_latched_without_repeats() -> None:
    loaded = load_reader_profile("pcsc-uid")
    times = loaded.profile.presence.times()
    assert not times.repeats
    assert times.remove_after > 0.4  # longer than pcscd's 400 ms poll
    assert loaded.table.card_of("044C177EC5DC80") == "As"
