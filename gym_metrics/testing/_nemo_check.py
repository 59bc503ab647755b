"""`gym-metrics check-env`: a NeMo Gym environment on gym-metrics against NeMo Gym itself, on
the user's own rollouts. NeMo Gym runs in its own venv (`--nemo-python`, _nemo_side.py): the
environment's FastAPI app built from its config, each row POSTed to `/verify`, the kept answers
to `/aggregate_metrics`. gym-metrics ports the environment (and those it imports), serves it
from the same config and collects the same rows. Both read the rows with the same indices
(numbered once, by the collector's rules, which are NeMo Gym's). Every row's reward and fields
and every metrics key are compared (numbers to relative 1e-9; the keys gym-metrics adds beside
NeMo Gym's, documented, are not differences).

With `episodes`, the rollouts' model turns are replayed by a scripted policy (testing/_replay.py)
and each row runs whole as a task: under NeMo Gym by the agent its config names (`POST /run`),
here by `collect`'s agent loop; every rollout's trajectory (its `response`: items, tool outputs,
usage) is compared too, all but the model's name.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError

ECHOED = ("responses_create_params", "response")
"""Keys of a verify answer that echo its request: not compared (both sides echo what they got)."""

def _nemo_side() -> Path:
    """gym_metrics/nemo_gym/_nemo_side.py: a file the other venv's Python runs, never imported here."""
    from gym_metrics import nemo_gym

    return Path(nemo_gym.__file__).with_name("_nemo_side.py")


class CheckError(GymMetricsError):
    """A side of the check could not run (the message says which and why)."""


@dataclass
class CheckReport:
    env: str
    rows: int
    differences: list[str] = field(default_factory=list)
    refused: int = 0
    """Rows NeMo Gym's /verify refused (and gym-metrics failed too): not verify requests it takes."""

    @property
    def equal(self) -> bool:
        return not self.differences


def _added(key: str) -> bool:
    """A key gym-metrics adds beside NeMo Gym's, documented (docs/statistics.md, docs/metrics.md)."""
    from gym_metrics.aggregate import ADDED_AGENT_METRICS

    return key.split("/", 1)[0] in ADDED_AGENT_METRICS or key.startswith("coverage/") or key in ("non_numeric_counts", "non_finite_counts")


def differences(theirs: Any, mine: Any, where: str = "") -> list[str]:
    """Where two JSON values differ (numbers to relative 1e-9; NeMo Gym's placeholder `sample`
    of a group is not compared, nor the keys gym-metrics adds beside NeMo Gym's)."""
    if isinstance(theirs, dict) and isinstance(mine, dict):
        found = [f"{where}.{k}: missing" for k in theirs if k not in mine and k != "sample"]
        found += [f"{where}.{k}: not in NeMo Gym's" for k in mine if k not in theirs and not _added(k)]
        for key in theirs.keys() & mine.keys() - {"sample"}:
            found += differences(theirs[key], mine[key], f"{where}.{key}")
        return found
    if isinstance(theirs, list) and isinstance(mine, list):
        if len(theirs) != len(mine):
            return [f"{where}: {len(mine)} items, NeMo Gym {len(theirs)}"]
        return [d for i, (a, b) in enumerate(zip(theirs, mine)) for d in differences(a, b, f"{where}[{i}]")]
    if isinstance(theirs, bool) or isinstance(mine, bool):  # true is not 1 in JSON
        return [] if type(theirs) is type(mine) and theirs == mine else [f"{where}: {mine!r} != NeMo Gym's {theirs!r}"]
    if isinstance(theirs, (int, float)) and isinstance(mine, (int, float)):
        same = (math.isnan(theirs) and math.isnan(mine)) or math.isclose(theirs, mine, rel_tol=1e-9, abs_tol=0.0)
        return [] if same else [f"{where}: {mine} != NeMo Gym's {theirs}"]
    return [] if theirs == mine else [f"{where}: {mine!r} != NeMo Gym's {theirs!r}"]


async def check_environment(
    root: str | Path, env: str, rollouts: str | Path, nemo_python: str, config: str | None = None, timeout_s: float = 3600, episodes: bool = False,
    servers: dict[str, str] | None = None,
) -> CheckReport:
    """The report of one environment on `rollouts` (verify request bodies; with `episodes`,
    recorded rollouts whose episodes are run again: module docstring); CheckError when a side
    cannot run, InvalidInputError naming a bad argument. `servers`: the model servers (a judge)
    both sides call, by name, each at `http://host:port`."""
    root, rollouts = Path(root), Path(rollouts)  # (a str given for either failed inside)
    servers = dict(servers or {})
    for name, url in servers.items():
        _check_url(name, url)
    folder = root / "resources_servers" / env
    if not folder.is_dir():
        raise InvalidInputError("no such environment", [FieldViolation("--env", f"{folder} is not a folder")])
    if not rollouts.is_file():
        raise InvalidInputError("no such rollouts file", [FieldViolation("--rollouts", str(rollouts))])
    with tempfile.TemporaryDirectory(prefix="gym-metrics-check-") as tmp:
        work = Path(tmp)
        if episodes:
            theirs, rows, metrics = await _episodes(root, env, rollouts, nemo_python, config, work, timeout_s, servers)
        else:
            indexed = _indexed(rollouts, f"{env}_simple_agent", work / "rows.jsonl")
            more = [f"--server={name}={url}" for name, url in servers.items()]
            theirs = await asyncio.to_thread(_nemo, root, env, indexed, nemo_python, config, work / "nemo.json", timeout_s, more)
            rows, metrics = await _ours(root, env, indexed, config, work, servers=servers)
    found = _row_differences(theirs["responses"], rows, compare_response=episodes)
    scored = {r["agent_ref"]["name"] for r in rows if "_gm_error" not in r and not r.get("_ng_failure_class")}
    mine = [m for m in metrics if m["agent_ref"]["name"] in scored]  # an agent whose every row failed (a judge's too) has no entry in NeMo Gym's
    found += differences(theirs["metrics"], mine, "metrics")
    return CheckReport(env, len(rows), found, sum("_nemo_refused" in r for r in theirs["responses"]))


def _row_differences(theirs: list[dict[str, Any]], mine: list[dict[str, Any]], compare_response: bool = False) -> list[str]:
    """Row by row, matched by agent and indices: a row NeMo Gym refused (its /verify answered an
    error status) must be a failed rollout here (`_gm_error`), and the other way round; a row
    that names a failure class (a judge that failed) must name the same one here, its fields
    compared as any row's. With `compare_response`, each row's `response` too, all but the
    model's name."""
    key = lambda r: (r["agent_ref"]["name"], r["_ng_task_index"], r["_ng_rollout_index"])  # noqa: E731

    def shown(row: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in row.items() if k not in ECHOED and not k.startswith(("_ng_", "_gm_")) and k != "agent_ref"}
        if compare_response and isinstance(row.get("response"), dict):
            out["response"] = {k: v for k, v in row["response"].items() if k != "model"}
        return out

    by_key = {key(r): r for r in mine}
    found = []
    for row in sorted(theirs, key=key):
        where = f"rows[task {row['_ng_task_index']}, rollout {row['_ng_rollout_index']}]"
        ours = by_key.pop(key(row), None)
        if ours is None:
            found.append(f"{where}: missing")
        elif row.get("_ng_failure_class") and ours.get("_ng_failure_class") and "_gm_error" not in ours:  # both failed alike, or not
            if row["_ng_failure_class"] != ours["_ng_failure_class"]:
                found.append(f"{where}: failed here as {ours['_ng_failure_class']}, under NeMo Gym as {row['_ng_failure_class']}")
            found += differences(shown(row), shown(ours), where)
        elif "_nemo_refused" in row or row.get("_ng_failure_class") or _failed(ours):
            if row.get("_ng_failure_class"):
                found.append(f"{where}: {_failed(ours)[:200] or 'scored'} here, failed under NeMo Gym ({_failed(row)[:200]})")
            elif "_nemo_refused" not in row:
                found.append(f"{where}: failed here ({_failed(ours)[:200]}), scored by NeMo Gym")
            elif not _failed(ours):
                found.append(f"{where}: scored here, refused by NeMo Gym ({row['_nemo_refused']}: {row['_nemo_detail'][:200]})")
            elif "_ng_failure_http_status" in ours and ours["_ng_failure_http_status"] != row["_nemo_refused"]:  # an agent's failed /run, both sides
                found.append(f"{where}: its /run answered {ours['_ng_failure_http_status']} here, {row['_nemo_refused']} under NeMo Gym")
        else:
            found += differences(shown(row), shown(ours), where)
    found += [f"rows[task {k[1]}, rollout {k[2]}]: not in NeMo Gym's" for k in by_key]
    return found


def _failed(row: dict[str, Any]) -> str:
    """Why a row of ours failed ('' when it did not): a failed rollout (`_gm_error`), or an
    agent's failed `/run` (NeMo Gym's sidecar row, `_ng_failure_class`)."""
    if "_gm_error" in row:
        return str(row["_gm_error"].get("message", "")) or "failed"
    if row.get("_ng_failure_class"):
        why = row.get("_ng_failure_response_body") or row.get("_ng_failure_message") or row.get("failure_reason") or ""
        return f"{row['_ng_failure_class']}: {why}"
    return ""


def _indexed(rollouts: Path, agent: str, out: Path) -> Path:
    """The rows with the indices the collector gives them (NeMo Gym's rules), and an agent_ref."""
    import orjson

    from gym_metrics.collector import indexed_rows

    out.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in indexed_rows(rollouts, agent)))
    return out


def _check_url(name: str, url: str) -> None:
    """A server both sides reach: NeMo Gym's ServerClient knows a server by host and port only."""
    from urllib.parse import urlsplit

    where = urlsplit(url)
    try:
        port = where.port
    except ValueError:
        port = None
    if where.scheme != "http" or not where.hostname or port is None or where.path not in ("", "/") or where.query:
        raise InvalidInputError("bad --server", [FieldViolation(f"--server {name}", f"{url!r}: expected http://HOST:PORT (NeMo Gym reaches a server by its host and port)")])


async def _episodes(
    root: Path, env: str, rollouts: Path, nemo_python: str, config: str | None, work: Path, timeout_s: float,
    servers: dict[str, str],
) -> tuple[Any, list[dict[str, Any]], Any]:
    """NeMo Gym's and gym-metrics' runs of the rollouts' tasks against one replaying policy."""
    import orjson

    from gym_metrics.nemo_gym import config_agents, config_file
    from gym_metrics.targets import ModelTargetConfig
    from gym_metrics.testing._policy import ScriptedPolicyServer
    from gym_metrics.testing._replay import replayed_script

    instance, agents = config_agents(config_file(root, env, config))
    if not agents:
        raise InvalidInputError("no agent to run the episodes", [FieldViolation("--config", f"no responses_api_agents block names {instance} as its resources_server")])
    indexed = _indexed(rollouts, agents[0][0], work / "rows.jsonl")
    script = replayed_script(orjson.loads(line) for line in indexed.read_bytes().splitlines() if line.strip())
    with ScriptedPolicyServer(script) as policy:
        more = ["--episodes", "--policy-port", str(policy.port), *(f"--server={n}={u}" for n, u in servers.items())]
        theirs = await asyncio.to_thread(_nemo, root, env, indexed, nemo_python, config, work / "nemo.json", timeout_s, more)
        tasks = work / "tasks.jsonl"
        tasks.write_bytes(b"".join(orjson.dumps(task) + b"\n" for task in theirs["tasks"]))
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
        rows, metrics = await _ours(root, env, tasks, config, work, target, servers)
    return theirs, rows, metrics


def _nemo(root: Path, env: str, rows: Path, python: str, config: str | None, out: Path, timeout_s: float, more: list[str] | None = None) -> Any:
    command = [python, str(_nemo_side()), "--root", str(root), "--env", env, "--rows", str(rows), "--out", str(out)]
    command += (["--config", config] if config else []) + (more or [])
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise InvalidInputError("cannot run NeMo Gym's Python", [FieldViolation("--nemo-python", f"{python}: no such file")]) from None
    except subprocess.TimeoutExpired:
        raise CheckError(f"NeMo Gym's side ran past {timeout_s:g} s") from None
    if done.returncode != 0:
        raise CheckError(f"NeMo Gym's side failed (exit {done.returncode}): {_last_error(done.stderr)}")
    return json.loads(out.read_text())


_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b.*")


def _last_error(stderr: str) -> str:
    """What the last exception said, all its lines (NeMo Gym's config errors run to several:
    the file first); else the last line."""
    lines = stderr.strip().splitlines() or ["(no output)"]
    start = max((i for i, line in enumerate(lines) if _RAISED.match(line)), default=len(lines) - 1)
    said = "\n".join(lines[start : start + 15])
    return said[:2000]


async def _ours(
    root: Path, env: str, rows: Path, config: str | None, work: Path, target: Any = None, servers: dict[str, str] | None = None
) -> tuple[list[dict[str, Any]], Any]:
    """gym-metrics: the environment ported into `work`, served from its config (composed from
    the checkout's root, as NeMo Gym's side is), collected (with `target`, each row's episode run
    against that policy)."""
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics._transport.server import ServerConfig, start_server
    from gym_metrics.collector import CollectOptions, collect_async
    from gym_metrics.nemo_gym import config_file, load_config_server
    from gym_metrics.nemo_gym.port import port_environment

    tree = work / "resources_servers"
    port_environment(root / "resources_servers" / env, tree / env)
    from gym_metrics.nemo_gym import NATIVE_AGENTS, config_agents, load_agents
    from gym_metrics.nemo_gym.port import port_folder

    for impl in {impl for _, impl, _ in config_agents(config_file(root, env, config))[1]} - NATIVE_AGENTS:  # an agent of its own code, ported beside it
        if (root / "responses_api_agents" / impl).is_dir():
            port_folder(root / "responses_api_agents" / impl, work / "responses_api_agents" / impl)
    if config and "/" in config:  # a benchmark's config: beside the ported tree, so its server is the ported one
        (work / config).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / config, work / config)
    here = os.getcwd()
    os.chdir(root)  # config_paths start at the checkout's root; then the environment's folder, where NeMo Gym's launcher runs it
    try:
        built = load_config_server(config_file(work, env, config), servers=servers, in_folder=True)
        server = await start_server(built, ServerConfig(port=0, log_requests=False))
        try:
            async with ResourcesClient(server.address) as client:
                agents = load_agents(config_file(work, env, config))
                options = CollectOptions(target=target, agents=agents) if target is not None else CollectOptions(reverify=True)  # rows that carry a reward too
                result = await collect_async(client, rows, work / "run.jsonl", options)
                written = [work / "run.jsonl", work / "run_failures.jsonl"]
                out = [json.loads(line) for path in written if path.exists() for line in path.read_text().splitlines() if line.strip()]
                metrics_path = result.metrics_path
                if any("_gm_error" in r or r.get("_ng_failure_class") for r in out):  # NeMo Gym's collection scores the rows that did not fail, alone
                    kept = work / "kept.jsonl"
                    kept.write_text("".join(json.dumps(r) + "\n" for r in out if "_gm_error" not in r and not r.get("_ng_failure_class")))
                    metrics_path = (await collect_async(client, kept, work / "kept_run.jsonl", CollectOptions())).metrics_path
        finally:
            await server.stop(0)
    finally:
        os.chdir(here)
    return out, json.loads(metrics_path.read_text())


__all__ = ["CheckError", "CheckReport", "check_environment", "differences"]
