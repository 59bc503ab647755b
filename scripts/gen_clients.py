"""Regenerate the checked-in client code under clients/ from protos/ (buf.gen.yaml).

Usage: python scripts/gen_clients.py

Needs buf (the npm package @bufbuild/buf, tests/_buf.py installs it), the Go plugins
buf.gen.yaml names, from Debian (`apt-get install protoc-gen-go protoc-gen-go-grpc`), and
protoc-gen-es from clients/typescript's devDependencies (`npm ci` there, done here). The tests
(tests/polyglot) regenerate into a temporary directory and fail when the committed copies
differ, as tests/transport/test_protos_fresh.py does for the Python stubs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    from _buf import buf_binary

    subprocess.run([buf_binary(), "generate"], cwd=ROOT, check=True)
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=ROOT / "clients" / "typescript", check=True)
    subprocess.run([buf_binary(), "generate", "--template", "clients/typescript/buf.gen.yaml"], cwd=ROOT, check=True)
    print("regenerated clients/go/gymmetricsv1 and clients/typescript/src/gen")


if __name__ == "__main__":
    main()
