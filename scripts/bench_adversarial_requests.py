"""The request shapes of issue 36, item 2, at the sizes the adversarial campaign sent, against a
real `gym-metrics serve` of the tree given (this one, or an older checkout for the figures
before): per shape, how long the call took and what it answered, the server's peak RSS, and
the health checks of a prober in its own process on a 20 ms cadence meanwhile (p99, max).

    python scripts/bench_adversarial_requests.py [--tree /path/to/old/checkout] [--out figures.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np

from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "scripts")]
from _health_probe import HealthProber  # noqa: E402
from bench_server_limits import rss_mb, stop_server  # noqa: E402

MB = 1 << 20
EMPTY_OBJECTS_60MB = b'{"count": 1, "pad": [' + b"{}," * (20 * MB) + b"{}]}"


def start(tree: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], str, int]:
    err = workdir / "serve.err"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gym_metrics.cli", "serve", str(ROOT / "tests" / "_tool_envs.py") + ":Counter", "--port", "0", "--http-port", "0"],
            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (found := re.search(r"listening on (\S+:\d+).*rewards over HTTP on port (\d+)", err.read_text())):
        assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
        time.sleep(0.05)
    return proc, found[1], int(found[2])


def shapes(stub: Any, http_port: int) -> dict[str, Callable[[], str]]:
    def unary(call: Any, request: Any) -> Callable[[], str]:
        def run() -> str:
            try:
                answer = call(request, timeout=120)
                return f"answered ({answer.ByteSize():,} bytes)"
            except grpc.RpcError as exc:
                return f"{exc.code().name}: {exc.details()[:120]}"

        return run

    def session_calls() -> str:
        calls = [pb.SessionCall(id=i, close=pb.CloseSessionRequest(session_id=f"s{i}")) for i in range(1_000_000)]
        try:
            answers = sum(len(m.answers) for m in stub.SessionCalls(iter([pb.SessionCallsRequest(calls=calls)]), timeout=120))
            return f"answered ({answers:,} answers)"
        except grpc.RpcError as exc:
            return f"{exc.code().name}: {exc.details()[:120]}"

    def http_groups() -> str:
        body = b'{"groups": [' + b'{"row": {}, "completions": []},' * 1_499_999 + b'{"row": {}, "completions": []}]}'
        answer = httpx.post(f"http://127.0.0.1:{http_port}/score_groups", content=body, headers={"content-type": "application/json"}, timeout=120)
        return f"HTTP {answer.status_code} ({len(answer.content):,} bytes): {answer.text[:120]}"

    session = stub.SeedSession(pb.SeedSessionRequest(body_json='{"initial_count": 0}')).session_id
    return {
        "ScoreGroups, 1M empty groups": unary(stub.ScoreGroups, pb.ScoreGroupsRequest(groups=[pb.CompletionGroup(row_json="{}")] * 1_000_000)),
        "SessionCalls, 1M calls in one message": session_calls,
        "CallTool, 60 MB of {} in the arguments": unary(stub.CallTool, pb.CallToolRequest(session_id=session, name="increment_counter", arguments_json=EMPTY_OBJECTS_60MB)),
        "SeedSession, 60 MB of {} in the row": unary(stub.SeedSession, pb.SeedSessionRequest(body_json=EMPTY_OBJECTS_60MB.replace(b'"count"', b'"initial_count"'))),
        "SeedSession, a 17 MB row (past MAX_ROW_BYTES)": unary(stub.SeedSession, pb.SeedSessionRequest(body_json=b'{"initial_count": 0, "note": "' + b"x" * (17 * MB) + b'"}')),
        "Verify, 60 MB of {} in the body": unary(stub.Verify, pb.VerifyRequest(body_json=EMPTY_OBJECTS_60MB)),
        "HTTP /score_groups, 1.5M empty groups": http_groups,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose gym_metrics is served (default: this one)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench-adversarial"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    proc, address, http_port = start(args.tree.resolve(), args.workdir)
    figures: dict[str, Any] = {"tree": str(args.tree), "machine": f"{os.cpu_count()} cores, python {sys.version.split()[0]}"}
    try:
        channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 256 * MB), ("grpc.max_receive_message_length", 256 * MB)])
        stub = resources_pb2_grpc.ResourcesServiceStub(channel)
        for name, run in shapes(stub, http_port).items():
            prober = HealthProber(address)
            peak, done = rss_mb(proc.pid), threading.Event()

            def watch() -> None:
                nonlocal peak
                while not done.wait(0.05):
                    peak = max(peak, rss_mb(proc.pid))

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            started = time.perf_counter()
            outcome = run()
            seconds = time.perf_counter() - started
            time.sleep(0.5)  # what the server does after answering shows in the checks too
            done.set()
            watcher.join()
            prober.stop()
            ms = np.array(prober.ms)
            figures[name] = {
                "seconds": round(seconds, 2), "outcome": outcome, "peak_rss_mb": round(peak),
                "health_checks": len(ms), "health_p99_ms": round(float(np.percentile(ms, 99)), 1), "health_max_ms": round(float(ms.max()), 1),
            }  # fmt: skip
            print(name, figures[name], file=sys.stderr, flush=True)
        channel.close()
    finally:
        stop_server(proc)
    print(json.dumps(figures, indent=2))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
