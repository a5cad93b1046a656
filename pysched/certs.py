"""Self-signed serving certificates: pysched's secure port without certificate files, and the
test control plane's webhook servers (``pysched.testing``), which both layers share."""

from __future__ import annotations

import datetime
import ipaddress
import socket
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SELF_SIGNED_DAYS = 365


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
