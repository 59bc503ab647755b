"""A self-signed certificate for the TLS tests, made with the openssl CLI (missing() without it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from _ci import need_tool


def self_signed(folder: Path, alt_names: str) -> tuple[Path, Path]:
    """(certificate, key) PEM files in `folder` for CN=localhost and `alt_names`
    (`subjectAltName`'s text: "IP:127.0.0.1,DNS:localhost")."""
    openssl = need_tool("openssl", "the TLS tests make their certificate with the openssl CLI")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost", "-addext", f"subjectAltName={alt_names}"],
        check=True, capture_output=True, timeout=20,
    )  # fmt: skip
    return cert, key
