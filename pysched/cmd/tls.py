"""The secure port's TLS: the given certificate and key, else a self-signed pair made at start.

As kube-scheduler: without `--tls-cert-file` / `--tls-private-key-file` the process serves a
certificate of its own, made in memory when it starts (kubelet's HTTPS probes and Prometheus with
`insecure_skip_verify` accept it; clients that verify need files signed by a CA they trust).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import socket
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SELF_SIGNED_DAYS = 365


class TLSError(ValueError):
    """The certificate or key cannot be used; the message is one line."""


def server_context(cert_file: str | None, key_file: str | None, hosts: Sequence[str] = ()) -> ssl.SSLContext:
    """A server-side context (TLS 1.2 or later) with the files given, else with a self-signed
    certificate for `hosts` (names or IPs) besides localhost and this machine's hostname."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file is None or key_file is None:
        cert, key = self_signed(hosts)
        with _pem_file(key + cert) as path:
            context.load_cert_chain(path)
        return context
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise TLSError(f"--tls-cert-file {cert_file} / --tls-private-key-file {key_file}: {reason}") from err
    return context


def self_signed(hosts: Sequence[str] = (), *, days: int = SELF_SIGNED_DAYS) -> tuple[bytes, bytes]:
    """(certificate, private key) in PEM: ECDSA P-256, valid `days` days from an hour ago, for
    `hosts`, localhost, 127.0.0.1, ::1 and the hostname."""
    key = ec.generate_private_key(ec.SECP256R1())
    hostname = socket.gethostname()
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys([*hosts, "localhost", hostname, "127.0.0.1", "::1"]):
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            if host:
                names.append(x509.DNSName(host))
            continue
        if not address.is_unspecified:  # 0.0.0.0 / :: names no address a client dials
            names.append(x509.IPAddress(address))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"pysched@{hostname}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))  # clocks of clients run a little behind
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@contextlib.contextmanager
def _pem_file(data: bytes) -> Iterator[str]:
    """A path `ssl` can load from (it reads chains only from files): a memory-only file where the
    OS has them (Linux), else a file in a private temporary folder, removed on exit."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("pysched-serving-cert")
        try:
            with open(fd, "wb", closefd=False) as out:
                out.write(data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="pysched-tls-") as folder:  # mode 0700
        path = Path(folder) / "serving.pem"
        path.write_bytes(data)
        yield str(path)
