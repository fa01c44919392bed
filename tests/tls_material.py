"""Certificates made for a test with the openssl command: a server CA and a client CA, a server
certificate for 127.0.0.1 and localhost, one already expired, one for another name, and client
certificates (the client CA's, a stranger's, an expired one, one whose key is encrypted)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

SERVER_NAMES = "IP:127.0.0.1,DNS:localhost"


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Material:
    ca: Pair
    """Signs the servers' certificates."""
    client_ca: Pair
    """Signs the clients' certificates."""
    stranger_ca: Pair
    """Signs nothing the servers or the clients trust."""
    server: Pair
    expired_server: Pair
    misnamed_server: Pair
    """Valid, signed by `ca`, for the name `elsewhere.test` only."""
    client: Pair
    stranger_client: Pair
    expired_client: Pair
    encrypted_client: Pair
    """`client`'s certificate with its key encrypted (pass phrase `secret`)."""
    client_bundle: Path
    """`client`'s certificate and key in one file."""


def openssl() -> str:
    found = shutil.which("openssl")
    if found is None:
        pytest.skip("needs the openssl command to make certificates")
    return found


def _run(*arguments: str) -> None:
    subprocess.run([openssl(), *arguments], check=True, capture_output=True, timeout=60)


def _key(path: Path) -> None:
    _run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))


def _ca(directory: Path, name: str) -> Pair:
    pair = Pair(directory / f"{name}.pem", directory / f"{name}.key")
    _key(pair.key)
    _run(
        "req", "-x509", "-key", str(pair.key), "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-out", str(pair.cert),
    )  # fmt: skip
    return pair


def _signed(directory: Path, name: str, ca: Pair, extensions: str, days: int = 2) -> Pair:
    pair = Pair(directory / f"{name}.pem", directory / f"{name}.key")
    request, extfile = directory / f"{name}.csr", directory / f"{name}.ext"
    _key(pair.key)
    _run("req", "-new", "-key", str(pair.key), "-subj", f"/CN={name}", "-out", str(request))
    extfile.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n" + extensions
    )
    _run(
        "x509", "-req", "-in", str(request), "-CA", str(ca.cert), "-CAkey", str(ca.key),
        "-CAcreateserial", "-days", str(days), "-extfile", str(extfile), "-out", str(pair.cert),
    )  # fmt: skip
    return pair


def make(directory: Path) -> Material:
    """Every certificate, in `directory` (about a second)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, client_ca = _ca(directory, "ca"), _ca(directory, "client-ca")
    stranger_ca = _ca(directory, "stranger-ca")
    server_use = "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
    client_use = "keyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n"
    client = _signed(directory, "client", client_ca, client_use)
    encrypted = directory / "client-encrypted.key"
    _run(
        "pkey", "-in", str(client.key), "-aes256", "-passout", "pass:secret",
        "-out", str(encrypted),
    )  # fmt: skip
    bundle = directory / "client-bundle.pem"
    bundle.write_bytes(client.cert.read_bytes() + client.key.read_bytes())
    return Material(
        ca=ca,
        client_ca=client_ca,
        stranger_ca=stranger_ca,
        server=_signed(directory, "server", ca, server_use + f"subjectAltName={SERVER_NAMES}\n"),
        expired_server=_signed(
            directory, "expired", ca, server_use + f"subjectAltName={SERVER_NAMES}\n", days=-1
        ),
        misnamed_server=_signed(
            directory, "misnamed", ca, server_use + "subjectAltName=DNS:elsewhere.test\n"
        ),
        client=client,
        stranger_client=_signed(directory, "stranger", stranger_ca, client_use),
        expired_client=_signed(directory, "expired-client", client_ca, client_use, days=-1),
        encrypted_client=Pair(client.cert, encrypted),
        client_bundle=bundle,
    )
