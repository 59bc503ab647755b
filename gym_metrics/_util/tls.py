"""TLS files checked before grpc gets them: grpc reports a bad certificate, key or root only
as a failed bind ("cannot listen on ...") or a refused connection, never naming the file."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from gym_metrics.errors import FieldViolation, InvalidInputError


def server_pair(cert_file: str | os.PathLike[str], key_file: str | os.PathLike[str]) -> tuple[bytes, bytes]:
    """(key, certificate chain) PEM bytes of a server; InvalidInputError naming the file and
    what is wrong (missing, not PEM, the key not the certificate's)."""
    cert, key = Path(cert_file), Path(key_file)
    cert_pem, key_pem = _read(cert, "tls_cert_file"), _read(key, "tls_key_file")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        why = "the key is not the certificate's" if exc.reason == "KEY_VALUES_MISMATCH" else "not a PEM certificate chain and its unencrypted private key"
        raise InvalidInputError("the TLS certificate and key cannot be used", [FieldViolation("tls_cert_file, tls_key_file", f"{cert}, {key}: {why}")]) from None
    return key_pem, cert_pem


def trusted_roots(ca: str | os.PathLike[str] | bytes) -> bytes:
    """PEM root certificates a client trusts (a path or the bytes); InvalidInputError naming
    the file when it is missing or holds no PEM certificate."""
    where = "the given bytes" if isinstance(ca, bytes) else str(ca)
    pem = ca if isinstance(ca, bytes) else _read(Path(ca), "tls_ca")
    try:
        ssl.create_default_context(cadata=pem.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError):
        raise InvalidInputError("the TLS root certificate cannot be used", [FieldViolation("tls_ca", f"{where}: no PEM certificate in it")]) from None
    return pem


def _read(path: Path, field_name: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidInputError("a TLS file cannot be read", [FieldViolation(field_name, f"{path}: {exc.strerror}")]) from None


__all__ = ["server_pair", "trusted_roots"]
