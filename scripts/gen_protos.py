"""Regenerate the checked-in protobuf / gRPC code under gym_metrics/v1/ from protos/.

Usage: python scripts/gen_protos.py [--out DIR]

The generated files are committed; tests/transport/test_protos_fresh.py regenerates into a temporary
directory and fails when the committed copies differ. Pin the generator (grpcio-tools and
mypy-protobuf in pyproject's `dev` extra) so output is reproducible.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
PACKAGE_DIR = Path("gym_metrics") / "v1"


def proto_files() -> list[Path]:
    return sorted((PROTO_ROOT / PACKAGE_DIR).glob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Run protoc into out_dir; return the generated files (relative to out_dir)."""
    from grpc_tools import protoc

    import grpc_tools

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    out_dir.mkdir(parents=True, exist_ok=True)
    scripts_dir = Path(sysconfig.get_path("scripts"))
    mypy_grpc = shutil.which("protoc-gen-mypy_grpc", path=str(scripts_dir)) or shutil.which("protoc-gen-mypy_grpc")
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
    ]
    if mypy_grpc is None:
        raise SystemExit("protoc-gen-mypy_grpc not found: pip install -e '.[dev]'")
    args += [f"--plugin=protoc-gen-mypy_grpc={mypy_grpc}", f"--mypy_grpc_out={out_dir}"]
    args += [str(p.relative_to(PROTO_ROOT)) for p in proto_files()]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted(p.relative_to(out_dir) for p in (out_dir / PACKAGE_DIR).glob("*_pb2*.py*"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT, help="output root (default: the repository)")
    ns = parser.parse_args()
    for path in generate(ns.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
