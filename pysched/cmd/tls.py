"""The secure port's TLS: the given certificate and key, else a self-signed pair made at start.

As kube-scheduler: without `--tls-cert-file` / `--tls-private-key-file` the process serves a
certificate of its own, made in memory when it starts (kubelet's HTTPS probes and Prometheus with
`insecure_skip_verify` accept it; clients that verify need files signed by a CA they trust). Given
files are read again when they change (`CertificateFiles`), so a rotated certificate is served
without a restart.
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


CHECK_SECONDS = 60.0  # how often given files are read again (kube-scheduler's serving certificates: a minute)


def self_signed_context(hosts: Sequence[str] = ()) -> ssl.SSLContext:
    """A server-side context with a self-signed certificate for `hosts` (names or IPs) besides
    localhost and this machine's hostname."""
    cert, key = self_signed(hosts)
    return _context(cert, key)


def _context(cert: bytes, key: bytes) -> ssl.SSLContext:
    """A server-side context (TLS 1.2 or later) serving this pair."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with _pem_file(key + b"\n" + cert) as path:
        context.load_cert_chain(path)
    return context


class CertificateFiles:
    """A certificate and key served from files and read again at each `check`: each new handshake
    gets the newest pair that loads (cert-manager and mounted Secrets rotate them in place). A
    pair that does not load (a rotation half written, a key of another certificate) is kept out
    and the last good one served, as kube-scheduler does; `check` names it once per change."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        first = self._read()
        if isinstance(first, str):
            raise TLSError(first)
        self._seen: tuple[bytes, bytes] | str = first  # the files as last read, or why they could not be
        self.context = self._load(first)  # the listener's: the first pair, handing on to the newest
        self.context.sni_callback = self._newest_pair  # called at every handshake, with or without SNI
        self._newest = self.context

    def _read(self) -> tuple[bytes, bytes] | str:
        try:
            return Path(self.cert_file).read_bytes(), Path(self.key_file).read_bytes()
        except OSError as err:
            return self._problem(err.strerror or str(err))

    def _load(self, pair: tuple[bytes, bytes]) -> ssl.SSLContext:
        try:
            return _context(*pair)
        except (OSError, ssl.SSLError) as err:
            raise TLSError(self._problem(str(err))) from err

    def _problem(self, reason: str) -> str:
        return f"--tls-cert-file {self.cert_file} / --tls-private-key-file {self.key_file}: {reason}"

    def _newest_pair(self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        if context is not self._newest:
            connection.context = self._newest

    def check(self) -> tuple[bool, str | None]:
        """Read the files again: (whether a new pair is served from now on, why the files cannot
        be, told once per change of them)."""
        now = self._read()
        if now == self._seen:
            return False, None
        self._seen = now
        if isinstance(now, str):
            return False, now  # a rotation may be replacing them: read again at the next check
        try:
            self._newest = self._load(now)
        except TLSError as err:
            return False, str(err)
        return True, None


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
