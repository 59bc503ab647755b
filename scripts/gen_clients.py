"""Regenerate the checked-in client code under clients/ from protos/ (buf.gen.yaml).

Usage: python scripts/gen_clients.py

Needs buf (the npm package @bufbuild/buf, tests/_buf.py installs it) and the protoc plugins
buf.gen.yaml names, from Debian: `apt-get install protoc-gen-go protoc-gen-go-grpc`. The tests
(tests/polyglot/test_go_client.py) regenerate into a temporary directory and fail when the
committed copies differ, as tests/transport/test_protos_fresh.py does for the Python stubs.
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
    print("regenerated clients/go/gymmetricsv1")


if __name__ == "__main__":
    main()
