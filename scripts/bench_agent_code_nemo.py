"""NeMo Gym 0.7.0's own speed_bench_agent (a model call per user turn) on its speed_bench
environment: NeMo Gym running it against gym-metrics running its ported code, the same rows
(the environment's example rows, 1-3 user turns, repeated to --rows), the same policy, in turn.

- policy: a raw asyncio HTTP/1.1 keep-alive server in its own process answering every
  `POST .../v1/responses` with a short text (gym_metrics.testing's Responses body) and
  `GET /metrics` with a page without speculative-decoding counters (speed_bench's scrape);
- NeMo Gym (its venv, --nemo-python): the resources server and the agent built from the config as
  check-env's NeMo side builds them, each under uvicorn in its own process (the agent forked, as
  `ng_run` runs each server in its own), and a third process POSTing each row to the agent's
  `/run` through aiohttp, --concurrency at once (NeMo Gym's collection);
- gym-metrics: `serve CONFIG` and `collect --server ... --agent-code CONFIG --input rows
  --policy-concurrency C`, each a process.

Wall time of the rows (NeMo Gym: first POST to last answer; gym-metrics: the collect process,
start-up and aggregation included), rows/s; every row checked answered (no failed run).

    .venv/bin/python scripts/bench_agent_code_nemo.py --nemo-python /tmp/ngvenv/bin/python --wheel /tmp/ng --rows 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENV, AGENT_IMPL, AGENT = "speed_bench", "speed_bench_agent", "speed_bench_simple_agent"
METRICS_PAGE = b"# no speculative decoding here\n"
TIMEOUT_S = 600


def _policy() -> None:
    """The policy child (gym-metrics' venv)."""
    import orjson

    from gym_metrics.testing import PolicyAnswer, prompt_of
    from gym_metrics.testing._policy import responses_body

    class Http(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport, self.buffer = transport, bytearray()

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
                head = bytes(self.buffer[:end]).decode("latin-1")
                length = int(m.group(1)) if (m := re.search(r"(?im)^content-length:\s*(\d+)", head)) else 0
                if len(self.buffer) < end + 4 + length:
                    return
                body = bytes(self.buffer[end + 4 : end + 4 + length])
                del self.buffer[: end + 4 + length]
                method, path = head.split(" ", 2)[:2]
                if method == "GET":
                    out, kind = METRICS_PAGE, b"text/plain"
                else:
                    request = orjson.loads(body)
                    out, kind = orjson.dumps(responses_body(PolicyAnswer(text=f"Noted: {prompt_of(request)[:24]}"), prompt_of(request), request, 0)), b"application/json"
                self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n" % (kind, len(out)) + out)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Http, "127.0.0.1", 0, backlog=20000)
        print(f"policy 127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
        await server.serve_forever()

    asyncio.run(main())


def _nemo_servers(root: str, policy_port: str) -> None:
    """NeMo Gym's side (its venv): the resources server here, the agent in a forked child."""
    import ctypes
    import importlib
    import socket
    import warnings

    import uvicorn
    from omegaconf import OmegaConf

    warnings.simplefilter("ignore")
    side = importlib.util.spec_from_file_location("nemo_side", ROOT / "gym_metrics" / "nemo_gym" / "_nemo_side.py")
    nemo_side = importlib.util.module_from_spec(side)  # type: ignore[arg-type]
    side.loader.exec_module(nemo_side)  # type: ignore[union-attr]
    from nemo_gym import global_config, server_utils
    from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.server_utils import ServerClient

    os.chdir(root)
    glob = nemo_side.read_config(Path("resources_servers") / ENV / "configs" / f"{ENV}.yaml", {})
    instance = nemo_side.instance_of(glob)
    sockets = {name: socket.create_server(("127.0.0.1", 0), backlog=20000) for name in (instance, AGENT)}
    for name, sock in sockets.items():
        node = glob[name]["resources_servers" if name == instance else "responses_api_agents"]
        node[next(iter(node))].update({"host": "127.0.0.1", "port": sock.getsockname()[1]})
    glob["policy_model"] = {"responses_api_models": {"scripted_policy": {"host": "127.0.0.1", "port": int(policy_port)}}}
    global_config._GLOBAL_CONFIG_DICT = glob
    client = ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port=0), global_config_dict=glob)
    server, _ = nemo_side.build_server(Path(root), glob, client)
    module = importlib.import_module(f"responses_api_agents.{AGENT_IMPL}.app")
    cls = next(c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__ and issubclass(c, SimpleResponsesAPIAgent))
    fields: Any = OmegaConf.to_container(glob[AGENT]["responses_api_agents"][AGENT_IMPL], resolve=True)
    agent = cls(config=cls.model_fields["config"].annotation.model_validate(fields | {"name": AGENT}), server_client=client)
    apps = {instance: nemo_side.finished_app(server), AGENT: nemo_side.finished_app(agent)}

    def run(name: str) -> None:
        config = uvicorn.Config(apps[name], log_level="warning", access_log=False, lifespan="on", backlog=20000)

        async def main() -> None:
            server_utils.set_global_aiohttp_client(server_utils.GlobalAIOHTTPAsyncClientConfig())
            await uvicorn.Server(config).serve(sockets=[sockets[name]])

        asyncio.run(main())

    if os.fork() == 0:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # die with the parent
        run(AGENT)
        os._exit(0)
    print(f"agent 127.0.0.1:{sockets[AGENT].getsockname()[1]}", flush=True)
    run(instance)


def _nemo_client(address: str, rows: str, concurrency: str) -> None:
    """NeMo Gym's collection, as it posts rows (its venv): aiohttp, `concurrency` at once."""
    import aiohttp

    bodies = [b for b in Path(rows).read_bytes().splitlines() if b.strip()]

    async def main() -> dict[str, Any]:
        answered, failed = 0, []
        connector = aiohttp.TCPConnector(limit=int(concurrency))
        async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(), timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as s:
            todo = iter(bodies)

            async def worker() -> None:
                nonlocal answered
                for body in todo:
                    async with s.post(f"http://{address}/run", data=body, headers={"content-type": "application/json"}) as answer:
                        if answer.status == 200 and "reward" in await answer.json():
                            answered += 1
                        else:
                            failed.append(answer.status)

            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(int(concurrency))))
            return {"wall": time.perf_counter() - start, "answered": answered, "failed": failed[:5]}

    print(json.dumps(asyncio.run(main())), flush=True)


class Child:
    """A child process whose line matching `pattern` (on stdout, or stderr) says where it listens."""

    def __init__(self, command: list[str], pattern: str, stderr: bool = False) -> None:
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE if stderr else None, text=True)
        stream: Any = self.proc.stderr if stderr else self.proc.stdout
        for line in stream:
            if (m := re.search(pattern, line)) is not None:
                self.found = m.group(1)
                return
        self.proc.kill()
        raise SystemExit(f"{command[:3]}: ended without saying its address")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def tree(wheel: Path, work: Path, policy_url: str, rows: int) -> tuple[Path, Path, Path]:
    """(NeMo Gym's root, the ported root, the rows file): speed_bench and its agent from the
    wheel, `vllm_base_url` the policy's (its /metrics page)."""
    from gym_metrics.collector import indexed_rows  # noqa: F401  (the rows are indexed as collect indexes them)
    from gym_metrics.nemo_gym.port import port_folder

    nemo, ported = work / "nemo", work / "ported"
    for base in (nemo, ported):
        (base / "responses_api_agents").mkdir(parents=True)
    shutil.copytree(wheel / "resources_servers" / ENV, nemo / "resources_servers" / ENV)
    shutil.copytree(wheel / "responses_api_agents" / AGENT_IMPL, nemo / "responses_api_agents" / AGENT_IMPL)
    config = nemo / "resources_servers" / ENV / "configs" / f"{ENV}.yaml"
    config.write_text(config.read_text().replace("vllm_base_url: ${policy_base_url}", f"vllm_base_url: {policy_url}"))
    port_folder(nemo / "resources_servers" / ENV, ported / "resources_servers" / ENV)
    port_folder(nemo / "responses_api_agents" / AGENT_IMPL, ported / "responses_api_agents" / AGENT_IMPL)
    examples = [json.loads(line) for line in (nemo / "resources_servers" / ENV / "data" / "example.jsonl").read_text().splitlines() if line.strip()]
    out = work / "rows.jsonl"
    with out.open("w") as f:
        for i in range(rows):
            row = {**examples[i % len(examples)], "_ng_task_index": i, "_ng_rollout_index": 0, "agent_ref": {"type": "responses_api_agents", "name": AGENT}}
            f.write(json.dumps(row) + "\n")
    return nemo, ported, out


def nemo_round(python: str, root: Path, rows: Path, policy_port: str, concurrency: int, n: int) -> float:
    servers = Child([python, __file__, "--_nemo_servers", str(root), policy_port], r"agent (\S+)")
    try:
        time.sleep(1.0)  # (the forked agent binds before the line is printed; its loop starts after)
        done = subprocess.run([python, __file__, "--_nemo_client", servers.found, str(rows), str(concurrency)], capture_output=True, text=True, timeout=TIMEOUT_S)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        servers.close()
    if figures["answered"] != n:
        raise SystemExit(f"NeMo Gym answered {figures['answered']} of {n} rows ({figures['failed']})")
    return float(figures["wall"])


def ours_round(root: Path, rows: Path, policy_url: str, concurrency: int, n: int, work: Path) -> float:
    exe = str(Path(sys.executable).with_name("gym-metrics"))
    config = root / "resources_servers" / ENV / "configs" / f"{ENV}.yaml"
    server = Child([exe, "--log-level", "warning", "serve", str(config), "--port", "0", "--max-sessions", "20000"], r"listening on (\S+:\d+)", stderr=True)
    out = work / "ours.jsonl"
    for stale in work.glob("ours*"):
        stale.unlink()
    try:
        start = time.perf_counter()
        subprocess.run([exe, "collect", "--server", server.found, "--input", str(rows), "--output", str(out), "--agent-code", str(config),
                        "--policy-url", f"{policy_url}/v1", "--policy-model", "m", "--policy-api", "responses",
                        "--policy-concurrency", str(concurrency)], check=True, capture_output=True, cwd=root, timeout=TIMEOUT_S)  # fmt: skip
        wall = time.perf_counter() - start
    finally:
        server.close()
    answered = sum(1 for line in out.read_text().splitlines() if '"reward"' in line and "_gm_error" not in line)
    if answered != n:
        raise SystemExit(f"gym-metrics answered {answered} of {n} rows")
    return wall


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1].startswith("--_"):
        {"--_policy": _policy, "--_nemo_servers": _nemo_servers, "--_nemo_client": _nemo_client}[sys.argv[1]](*sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo-python", required=True)
    parser.add_argument("--wheel", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    policy = Child([sys.executable, __file__, "--_policy"], r"policy (\S+)")
    policy_url = f"http://{policy.found}"
    try:
        with tempfile.TemporaryDirectory(prefix="bench-agent-code-nemo-") as tmp:
            nemo_root, ported_root, rows = tree(args.wheel, Path(tmp), policy_url, args.rows)
            walls: dict[str, list[float]] = {"NeMo Gym 0.7.0": [], "gym-metrics": []}
            for _ in range(args.rounds):  # in turn, each round
                walls["NeMo Gym 0.7.0"].append(nemo_round(args.nemo_python, nemo_root, rows, policy.found.rsplit(":", 1)[1], args.concurrency, args.rows))
                walls["gym-metrics"].append(ours_round(ported_root, rows, policy_url, args.concurrency, args.rows, Path(tmp)))
    finally:
        policy.close()
    medians = {side: statistics.median(w) for side, w in walls.items()}
    for side, w in walls.items():
        print(f"{side:15s} wall {medians[side]:.2f} s (median; {', '.join(f'{x:.2f}' for x in w)}), {args.rows / medians[side]:,.0f} rows/s")
    print(f"ratio {medians['NeMo Gym 0.7.0'] / medians['gym-metrics']:.1f}x ({args.rows} rows, {args.concurrency} at once)")


if __name__ == "__main__":
    main()
