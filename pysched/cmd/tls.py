"""The secure port's TLS: the given certificate and key, else a self-signed pair made at start.

As kube-scheduler: without `--tls-cert-file` / `--tls-private-key-file` the process serves a
certificate of its own, made in memory when it starts (kubelet's HTTPS probes and Prometheus with
`insecure_skip_verify` accept it; clients that verify need files signed by a CA they trust).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from pysched.certs import self_signed


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
