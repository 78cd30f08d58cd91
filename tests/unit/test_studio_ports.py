"""Who holds a port, from ``/proc/net/tcp``'s text (issue 25, item 7); the demo password."""

from __future__ import annotations

import stat

from hypothesis import given
from hypothesis import strategies as st

from controller.cli.run import _demo_password
from controller.studio.ports import listening_inodes

TABLE = (
    b"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    b"timeout inode\n"
    b"   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000"
    b"        0 4242 1 0000000000000000 100 0 0 10 0\n"
    b"   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000"
    b"        0 4343 1 0000000000000000 20 4 30 10 -1\n"
    b"   2: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0"
    b"        0 5151 1 0000000000000000 100 0 0 10 0\n"
)


def test_the_listening_socket_of_a_port():
    assert listening_inodes(TABLE, 8080) == {4242}  # not the connected one (st 01)
    assert listening_inodes(TABLE, 80) == {5151}
    assert listening_inodes(TABLE, 443) == set()


def test_tcp6_addresses():
    line = (
        b"   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A "
        b"00000000:00000000 00:00000000 00000000     0        0 777 1 0 100 0 0 10 0\n"
    )
    assert listening_inodes(b"header\n" + line, 8080) == {777}


@given(st.binary(max_size=2000), st.integers(min_value=0, max_value=65535))
def test_any_bytes_are_read_without_an_error(table, port):
    assert isinstance(listening_inodes(table, port), set)


def test_the_demo_pit_password_is_kept_for_the_run_directory(tmp_path):
    path = tmp_path / "var" / "studio-pit-password"
    first = _demo_password(path)
    assert len(first) >= 12
    assert _demo_password(path) == first  # the next run: the same password
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("short\n")  # not a password the console would take: a new one
    replaced = _demo_password(path)
    assert replaced != "short" and _demo_password(path) == replaced
