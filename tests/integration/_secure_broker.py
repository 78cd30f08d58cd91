"""A real Mosquitto with a given config (ACLs, passwords, TLS) for security tests.

Small on purpose: write the config into a directory, pick free loopback ports, start
Mosquitto (the binaries found by :mod:`tests.support.mosquitto`, shared by every test that
needs a broker), wait until every listener accepts TCP connections, stop it.

The config body is a ``str.format`` template with ``{port}`` (plain listener), ``{tls_port}``
(TLS listener) and ``{dir}`` (the broker's directory). ``user root`` is added when the test
runs as root, so the broker can read files in pytest's private tmp directories.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.mosquitto import find_mosquitto, find_mosquitto_passwd, free_port

ROLE_PASSWORDS = {
    "table-tp-01": "pw-table-tp-01",
    "table-tp-02": "pw-table-tp-02",
    "betting": "pw-betting",
    "pitboss": "pw-pitboss",
    "stream": "pw-stream",
    "viewer": "pw-viewer",
}
"""Users of the committed ACL file, with test passwords (the ones most tests need)."""

CONTROLLER_LISTENER_PASSWORDS = {
    **{
        f"table-{table}{suffix}": f"pw-table-{table}{suffix}"
        for table in ("tp-01", "tp-02")
        for suffix in ("", "-cmd", "-status")
    },
    **{
        f"archive-{n}{suffix}": f"pw-archive-{n}{suffix}"
        for n in (1, 2)
        for suffix in ("", "-replay")
    },
}
"""The shipped config's ``passwd-tables`` users (the controllers' listener, 8884): each
table's three connections and each archive instance's two, with test passwords."""

ROLES_LISTENER_PASSWORDS = {
    user: f"pw-{user}" for user in ("betting", "pitboss", "pitconsole", "stream", "viewer")
}
"""The shipped config's ``passwd`` users (the roles' listener, 8883), with test passwords."""

SHIPPED_PASSWORDS = {**ROLES_LISTENER_PASSWORDS, **CONTROLLER_LISTENER_PASSWORDS}
"""Every user of the committed ACL file (``acl_users()``), with test passwords."""


def make_password_file(path: Path, users: dict[str, str]) -> Path:
    """A Mosquitto password file with these users, made by ``mosquitto_passwd -b``."""
    path.write_text("")
    for user, password in users.items():
        subprocess.run(
            [find_mosquitto_passwd(), "-b", str(path), user, password],
            check=True,
            capture_output=True,
            timeout=30,
        )
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class TlsFiles:
    """A CA and a server certificate for 127.0.0.1/localhost signed by it."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    ca_key: Path | None = None


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_tls(directory: Path, *, ca_name: str = "tablectl test CA") -> TlsFiles:
    """Generate a CA and a server certificate (EC P-256) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_name))
        .issuer_name(_name(ca_name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(
        ca_cert=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        ca_key=directory / "ca.key",
    )
    assert files.ca_key is not None
    files.ca_key.write_bytes(_pem_key(ca_key))
    files.ca_key.chmod(0o600)
    files.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.server_cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    files.server_key.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    files.server_key.chmod(0o600)
    return files


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_client_cert(tls: TlsFiles, directory: Path, common_name: str) -> tuple[Path, Path]:
    """A client certificate (clientAuth, CN=common_name) signed by ``tls``'s CA."""
    assert tls.ca_key is not None, "make_tls keeps the CA key"
    ca_key = serialization.load_pem_private_key(tls.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_cert = x509.load_pem_x509_certificate(tls.ca_cert.read_bytes())
    now = dt.datetime.now(dt.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path = directory / f"{common_name}.crt"
    key_path = directory / f"{common_name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(_pem_key(key))
    key_path.chmod(0o600)
    return cert_path, key_path


class SecureBroker:
    """A Mosquitto process with a config from a template. Use as a context manager.

    Args:
        config: The config body (``{port}``, ``{tls_port}``, ``{dir}`` are filled in).
        directory: Where the config, the log and the persistence files go.
    """

    def __init__(self, config: str, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.tls_port = free_port()
        body = config.format(port=self.port, tls_port=self.tls_port, dir=directory)
        if os.geteuid() == 0 and "\nuser " not in f"\n{body}":
            body += "\nuser root\n"
        self.config_path = directory / "mosquitto.conf"
        self.log_path = directory / "mosquitto.log"
        self.config_text = body
        self.listening = [port for port in (self.port, self.tls_port) if f"listener {port}" in body]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15.0) -> SecureBroker:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config_text)
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [find_mosquitto(), "-c", str(self.config_path)], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        deadline = time.monotonic() + timeout
        waiting = list(self.listening)
        while waiting:
            if self.process.poll() is not None:
                raise RuntimeError(f"mosquitto exited with {self.process.returncode}: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", waiting[0]), timeout=1):
                    waiting.pop(0)
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(
                        f"mosquitto not listening on {waiting} after {timeout}s: {self.log()}"
                    ) from None
                time.sleep(0.02)
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def __enter__(self) -> SecureBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


COMMITTED = Path(__file__).resolve().parents[2] / "config" / "mosquitto"
"""The committed broker config folder (config/mosquitto)."""


def copy_committed(name: str, directory: Path) -> Path:
    """Copy a file from config/mosquitto into ``directory`` (unchanged) and return its path."""
    source = COMMITTED / name
    target = directory / name
    shutil.copyfile(source, target)
    return target


def production_config(
    directory: Path, tls: TlsFiles, passwd: Path, passwd_tables: Path | None = None
) -> str:
    """config/mosquitto/mosquitto.conf with only its file paths and ports replaced.

    The roles' TLS listener (8883) becomes ``broker.tls_port``, the controllers' (8884)
    ``broker.port``.
    """
    text = copy_committed("mosquitto.conf", directory).read_text()
    replacements = {
        "/etc/mosquitto/certs/ca.crt": str(tls.ca_cert),
        "/etc/mosquitto/certs/server.crt": str(tls.server_cert),
        "/etc/mosquitto/certs/server.key": str(tls.server_key),
        "/etc/mosquitto/passwd-tables": str(passwd_tables or passwd),
        "/etc/mosquitto/passwd": str(passwd),
        "/etc/mosquitto/acl": str(COMMITTED / "acl"),
        "/var/lib/mosquitto/": f"{directory}/data/",
        "listener 8883": "listener {tls_port} 127.0.0.1",
        "listener 8884": "listener {port} 127.0.0.1",
        "log_dest syslog": "log_dest stderr",
    }
    for old, new in replacements.items():
        assert old in text, f"mosquitto.conf no longer mentions {old!r}"
        text = text.replace(old, new)
    (directory / "data").mkdir()
    return text


def acl_users(acl: Path | None = None) -> list[str]:
    """The users the committed ACL file (or ``acl``) names, in order."""
    text = (acl or COMMITTED / "acl").read_text()
    return [
        line.split(None, 1)[1].strip() for line in text.splitlines() if line.startswith("user ")
    ]


def shipped_broker(directory: Path) -> tuple[SecureBroker, TlsFiles]:
    """The shipped config (paths and ports replaced) with every user of its ACL (not started).

    The roles' listener is ``broker.tls_port``, the controllers' ``broker.port``; passwords
    are :data:`SHIPPED_PASSWORDS`.
    """
    directory.mkdir(parents=True, exist_ok=True)
    tls = make_tls(directory / "certs")
    roles = make_password_file(directory / "passwd", ROLES_LISTENER_PASSWORDS)
    tables = make_password_file(directory / "passwd-tables", CONTROLLER_LISTENER_PASSWORDS)
    return SecureBroker(production_config(directory, tls, roles, tables), directory), tls
