"""buf from the npm registry (its package ships the binary), installed once per machine: the
reflection test's `buf curl` and the contract's lint and breaking-change checks."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from _ci import need_tool

BUF_VERSION = "1.75.0"
BUF_DIR = Path(tempfile.gettempdir()) / f"gym-metrics-buf-{BUF_VERSION}"


def buf_binary() -> str:
    npm = need_tool("npm", "buf comes from the npm registry")
    binary = BUF_DIR / "node_modules" / ".bin" / "buf"
    if not binary.exists():
        done = subprocess.run(
            [npm, "install", "--prefix", str(BUF_DIR), "--no-audit", "--no-fund", "--no-save", f"@bufbuild/buf@{BUF_VERSION}"],
            capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert done.returncode == 0 and binary.exists(), done.stdout + done.stderr
    return str(binary)
