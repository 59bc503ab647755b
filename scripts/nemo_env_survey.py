"""Survey of NeMo Gym 0.7.0's resources servers on gym-metrics (issue 26): every environment of
the wheel, ported by the import rewrite alone, loaded from each of its config YAMLs with
`gym_metrics.nemo_gym.load_config_server` and verified on up to 3 rows of its example data.

    .venv/bin/python scripts/nemo_env_survey.py [--wheel .cache/nemo_gym-0.7.0-py3-none-any.whl]
        [--survey scripts/nemo_env_services.json] [--doc docs/nemo-gym-environments.md]
        [--missing /tmp/ng26/missing.json] [--jobs 8] [--only ENV ...]

Each environment is probed in its own subprocess (an environment may hang, exit, or leave
threads behind), with a time limit. Statuses:
- serves: a config loads and verify answers every valid example row without error;
- loads: a config loads; verify was not exercised (no valid example row);
- needs-service: a judge / model server, sandbox, network or API key is needed (the survey's
  classification, scripts/nemo_env_services.json: what each env uses, read off the wheel) and the env does not serve without it;
- missing-module: it imports a `gym_metrics.nemo_gym` module or name that does not exist;
- missing-dependency: it imports a third-party package that is not installed;
- other: anything else (the error is recorded).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WHEEL = ROOT / ".cache" / "nemo_gym-0.7.0-py3-none-any.whl"
DATA_FILES = ("data/example_rollouts.jsonl", "data/example.jsonl")
ROWS_TRIED = 3
VERIFY_TIMEOUT_S = 30.0
ENV_TIMEOUT_S = 180.0
RANK = {"serves": 0, "loads": 1, "needs-service": 2, "missing-module": 3, "missing-dependency": 4, "other": 5, "not-a-server": 6}
NO_MODULE = re.compile(r"No module named '([^']+)'")
NETWORK = re.compile(r"URLError|Name or service not known|ConnectError|ConnectionError|Temporary failure in name resolution")
LIBRARY = re.compile(r"Can't instantiate abstract class|defines none \(one SimpleResourcesServer")
NO_NAME = re.compile(r"cannot import name '([^']+)' from '([^']+)'")


# ----- one environment (run in a subprocess) -----


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:600]


def _resource_blocks(config: Path) -> list[str]:
    import yaml

    try:
        document = yaml.safe_load(config.read_text())
    except Exception:
        return [""]  # load_config_server reports why
    if not isinstance(document, dict):
        return []
    return [str(k) for k, v in document.items() if isinstance(v, dict) and isinstance(v.get("resources_servers"), dict)]


def _rows(env_dir: Path) -> list[str]:
    """The rows NeMo Gym's collection would send: each recorded rollout's `response` joined to
    its task row of data/example.jsonl (same `input`, else same line), then the recorded
    rollouts as they are, then the task rows; null top-level keys of `responses_create_params`
    removed (recorded rollouts carry `parallel_tool_calls: null`, `tool_choice: null`, which
    NeMo Gym's request model rejects too; a dataset row omits them)."""
    tasks, rollouts = (_read(env_dir / name) for name in DATA_FILES[::-1])
    joined = []
    for i, rollout in enumerate(rollouts):
        same = [t for t in tasks if _input(t) is not None and _input(t) == _input(rollout)]
        task = same[0] if same else (tasks[i] if i < len(tasks) else None)
        if task is not None and "response" in rollout:
            joined.append({k: v for k, v in task.items() if k != "agent_ref" and not k.startswith("_ng_")} | {"response": rollout["response"]})
    return [_without_nulls(row) for row in joined + rollouts + tasks]


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _input(row: dict[str, Any]) -> Any:
    params = row.get("responses_create_params")
    return params.get("input") if isinstance(params, dict) else None


def _without_nulls(row: dict[str, Any]) -> str:
    params = row.get("responses_create_params")
    if isinstance(params, dict):
        row = row | {"responses_create_params": {k: v for k, v in params.items() if v is not None}}
    return json.dumps(row)


async def _verify_rows(server: Any, env_dir: Path) -> dict[str, Any]:
    """Up to ROWS_TRIED rows that validate, each verified; what happened."""
    valid, invalid_error = [], None
    for i, line in enumerate(_rows(env_dir)):
        try:
            server.parse_verify_request(line, i)
            valid.append(line)
        except Exception as exc:
            invalid_error = invalid_error or _describe(exc)
        if len(valid) == ROWS_TRIED:
            break
    out: dict[str, Any] = {"rows_valid": len(valid), "rows_invalid_error": invalid_error, "verified": 0, "judge_masked": 0}
    for i, line in enumerate(valid):
        try:
            _, answer = await asyncio.wait_for(server.verify_json(line, i), VERIFY_TIMEOUT_S)
        except BaseException as exc:  # noqa: BLE001 - recorded, whatever it is
            out["verify_error"] = _describe(exc)
            break
        if json.loads(answer).get("failure_kind") == "judge_failed":
            out["judge_masked"] += 1
            out["judge_error"] = json.loads(answer).get("failure_reason", "")[:300]
        else:
            out["verified"] += 1
    return out


async def probe_env(env_dir: Path) -> list[dict[str, Any]]:
    """Every resources server of every config YAML of the environment, loaded and verified."""
    from gym_metrics.nemo_gym import load_config_server

    results = []
    env_dir = env_dir.resolve()  # (the server runs in its folder, as `serve` runs it)
    configs = sorted((env_dir / "configs").glob("*.yaml")) + sorted((env_dir / "configs").glob("*.yml"))
    for config in configs:
        for name in _resource_blocks(config):
            result: dict[str, Any] = {"config": config.name, "name": name}
            try:
                server = load_config_server(config, name=name or None, in_folder=True)
            except BaseException as exc:  # noqa: BLE001 - SystemExit too: recorded
                result["load_error"] = _describe(exc)
                local = NO_MODULE.search(result["load_error"])
                top = local.group(1).split(".")[0] if local else ""
                if top and ((env_dir / f"{top}.py").is_file() or (env_dir / top).is_dir()):
                    result["local_module"] = top  # NeMo Gym runs app.py with its folder on sys.path
                results.append(result)
                continue
            result["server_class"] = type(server).__name__
            result |= await _verify_rows(server, env_dir)
            results.append(result)
    return results


def run_one(env_dir: Path, out: Path) -> None:
    sys.path.insert(0, str(env_dir.parent.parent))
    try:
        results: Any = asyncio.run(probe_env(env_dir))
    except BaseException as exc:  # noqa: BLE001
        results = [{"config": "", "name": "", "load_error": _describe(exc)}]
    out.write_text(json.dumps(results))
    sys.stdout.flush()
    os._exit(0)  # environments may leave threads or loops behind


# ----- the whole tree -----


def port_tree(wheel: Path, root: Path) -> Path:
    from gym_metrics.nemo_gym.port import port_folder

    source = root / "_wheel"
    folders = ("resources_servers", "responses_api_agents", "responses_api_models", "environment_servers", "environments", "benchmarks")  # what configs include
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(source, [m for m in archive.namelist() if m.startswith(tuple(f + "/" for f in folders))])
    for folder in folders:
        port_folder(source / folder, root / folder)
    return root / "resources_servers"


def probe_in_subprocess(env_dir: Path, scratch: Path) -> list[dict[str, Any]]:
    out = scratch / f"{env_dir.name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--probe", str(env_dir), str(out)]
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=ENV_TIMEOUT_S, cwd=scratch, env=environ)
    except subprocess.TimeoutExpired:
        return [{"config": "", "name": "", "load_error": f"TimeoutError: no answer in {ENV_TIMEOUT_S:.0f} s"}]
    if out.is_file():
        result: list[dict[str, Any]] = json.loads(out.read_text())
        return result
    tail = (done.stderr or done.stdout or "").strip().splitlines()[-3:]
    return [{"config": "", "name": "", "load_error": f"process exited {done.returncode}: {' | '.join(tail)}"[:600]}]


# ----- classification -----


def needs_service(info: dict[str, Any]) -> str | None:
    """The survey's reason when the environment needs a service (judge, sandbox, network, key)."""
    uses = info.get("uses", {})
    reason = info.get("classification_reason", "")
    if uses.get("judge_or_model_server") or uses.get("sandbox") or uses.get("network") or uses.get("setup_needs_network"):
        return reason
    if "external dataset" in reason or "api_key" in reason:
        return reason
    return None


def _missing(error: str) -> tuple[str, str] | None:
    """(kind, what) when the error is an import of something absent."""
    name = NO_NAME.search(error)
    if name:
        module = name.group(2)
        kind = "missing-module" if module.startswith("gym_metrics.nemo_gym") else "missing-dependency"
        return kind, f"{module}.{name.group(1)}"
    module_match = NO_MODULE.search(error)
    if module_match:
        module = module_match.group(1)
        kind = "missing-module" if module.startswith(("gym_metrics.nemo_gym", "resources_servers")) else "missing-dependency"
        return kind, module
    return None


def classify_config(result: dict[str, Any], service: str | None) -> tuple[str, str]:
    """(status, reason) of one config's server."""
    error = result.get("load_error") or result.get("verify_error")
    if error:
        missing = _missing(error)
        where = "load" if result.get("load_error") else "verify"
        if service:
            return "needs-service", f"{service}; {where}: {error}"
        if NETWORK.search(error):
            return "needs-service", f"network at {where}: {error}"
        if result.get("local_module"):
            return "missing-module", f"loader: `import {result['local_module']}` of the env's own folder (NeMo Gym runs app.py with its folder on sys.path)"
        if missing:
            return missing[0], missing[1]
        if LIBRARY.search(error):
            return "not-a-server", f"a base package other environments build on ({error})"
        if where == "verify" and error.startswith("NotImplementedError"):
            return "loads", f"a /step environment (collected with a policy as NeMo Gym's gymnasium_agent runs it; docs/nemo-gym.md#gymnasium); its verify refuses: {error}"
        return "other", f"{where}: {error}"
    if result.get("judge_masked"):
        return "needs-service", f"{service or 'judge'}; verify: needs a judge ({result.get('judge_error', '')})"
    if result.get("verified"):
        return "serves", f"verified {result['verified']} example row(s)"
    why = result.get("rows_invalid_error") or "no example rows"
    if service:
        return "needs-service", f"{service}; loads; verify not exercised ({why})"
    return "loads", f"verify not exercised: {why}"


def classify_env(name: str, results: list[dict[str, Any]], info: dict[str, Any]) -> dict[str, Any]:
    service = needs_service(info)
    if not results:
        status, reason = ("other", "no config YAML (a library package, not a server)")
        if not (Path(info.get("entry_file", "")).name == "app.py"):
            status = "not-a-server"
        per_config: list[tuple[str, str]] = [(status, reason)]
    else:
        per_config = [classify_config(r, service) for r in results]
    best = min(per_config, key=lambda sr: RANK.get(sr[0], 9))
    served = sum(1 for s, _ in per_config if s in ("serves", "loads"))
    return {
        "env": name,
        "status": best[0],
        "reason": best[1],
        "configs": f"{served}/{len(per_config)}",
        "needs_service": service,
        "results": results,
    }


def static_missing(survey: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every `nemo_gym.<module>.<name>` the environments import (survey: app.py and what it
    imports) that gym_metrics.nemo_gym lacks, with the environments importing it."""
    wanted: dict[str, list[str]] = {}
    for env, info in survey.items():
        for module, names in info.get("nemo_gym_imports", {}).items():
            for item in names or ["*"]:
                wanted.setdefault(f"{module}:{item}", []).append(env)
    missing: dict[str, dict[str, Any]] = {}
    for key, envs in wanted.items():
        module, item = key.split(":")
        ours = "gym_metrics." + module
        try:
            found = importlib.import_module(ours)
            ok = item == "*" or hasattr(found, item) or _is_submodule(ours, item)
        except ImportError:
            ok = False
        if not ok:
            missing[f"{ours}.{item}" if item != "*" else ours] = {"count": len(envs), "envs": sorted(envs)}
    return dict(sorted(missing.items(), key=lambda kv: (-kv[1]["count"], kv[0])))


def _is_submodule(module: str, item: str) -> bool:
    try:
        importlib.import_module(f"{module}.{item}")
        return True
    except ImportError:
        return False


# ----- outputs -----


def percentage(rows: list[dict[str, Any]], without: tuple[str, ...] = ()) -> tuple[int, int, float]:
    """(serving or loading, pool, percent) over the envs that need no external service (and
    whose status is not in `without`)."""
    skip = ("needs-service", "not-a-server", *without)
    pool = [r for r in rows if r["status"] not in skip and not r["needs_service"]]
    good = sum(1 for r in pool if r["status"] in ("serves", "loads"))
    return good, len(pool), (100.0 * good / len(pool) if pool else 0.0)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:300]


def write_doc(path: Path, rows: list[dict[str, Any]]) -> None:
    counts = Counter(r["status"] for r in rows)
    good, pool, pct = percentage(rows)
    good_dep, pool_dep, pct_dep = percentage(rows, ("missing-dependency",))
    lines = [
        "# NeMo Gym 0.7.0 environments on gym-metrics",
        "",
        "Every resources server of the nemo-gym 0.7.0 wheel, ported by rewriting `nemo_gym` ->",
        "`gym_metrics.nemo_gym` in its import lines and nothing else, loaded from each config YAML with",
        "`gym_metrics.nemo_gym.load_config_server` and verified in-process on up to 3 rows of its",
        "example data (`data/example_rollouts.jsonl`). Generated by `scripts/nemo_env_survey.py`",
        "(see its docstring for the statuses); the per-row rewards of a suite of these are checked",
        "against NeMo Gym's own in tests/nemo_gym, and `gym-metrics check-env` compares any of them",
        "with NeMo Gym itself on your rollouts (docs/nemo-gym.md).",
        "",
        "Run as a NeMo Gym user runs an environment: in a venv with `gym-metrics[nemo-gym]` and the",
        "packages the environments' `requirements.txt` files name that install from PyPI (jiwer,",
        "whisper_normalizer, gymnasium, gym-sokoban, imageio, rouge-score, immutabledict, langdetect,",
        "nltk, defusedxml, pandas, editdistance, xmltodict, toml, openapi-schema-validator, tomli-w,",
        "rdkit, safe-mol, huggingface-hub, evalplus, reasoning-gym, assaybench, ray):",
        "",
        "    python -m venv survey && survey/bin/pip install \"gym-metrics[nemo-gym]\" <those packages>",
        "    survey/bin/python scripts/nemo_env_survey.py --jobs 2",
        "",
        "An environment that times out or whose own packages changed since (evalplus) reads `other`;",
        "the run's machine and the versions it installed decide those.",
        "",
        f"Of the {pool} environments that need no external service (judge or model server, sandbox,",
        f"network, API key), **{good} ({pct:.1f}%)** serve or load; of the {pool_dep} of them whose",
        f"third-party packages are installed here, {good_dep} ({pct_dep:.1f}%).",
        "",
        "| status | environments |",
        "|---|---|",
        *[f"| {s} | {counts[s]} |" for s in sorted(counts, key=lambda s: RANK.get(s, 9))],
        f"| total | {len(rows)} |",
        "",
        "`configs` counts the config YAML servers that serve or load, of all the env's configs.",
        "",
        "| environment | status | configs | reason / missing piece |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r['env']} | {r['status']} | {r['configs']} | {_cell(r['reason'])} |" for r in rows]
    path.write_text("\n".join(lines) + "\n")


def write_missing(path: Path, rows: list[dict[str, Any]], static: dict[str, Any]) -> None:
    runtime: dict[str, list[str]] = {}
    for r in rows:
        for result in r["results"]:
            missing = _missing(result.get("load_error") or result.get("verify_error") or "")
            if result.get("local_module"):
                missing = ("loader", f"env folder on sys.path (`import {result['local_module']}`)")
            if missing:
                runtime.setdefault(f"{missing[0]}: {missing[1]}", []).append(r["env"])
    first = {k: {"count": len(set(v)), "envs": sorted(set(v))} for k, v in sorted(runtime.items(), key=lambda kv: -len(set(kv[1])))}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"first_failing_import": first, "nemo_gym_names_imported_but_absent": static}, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", nargs=2, metavar=("ENV_DIR", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--wheel", type=Path, default=WHEEL)
    parser.add_argument("--survey", type=Path, default=Path(__file__).with_name("nemo_env_services.json"))
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "nemo-gym-environments.md")
    parser.add_argument("--missing", type=Path, default=Path("/tmp/ng26/missing.json"))
    parser.add_argument("--results", type=Path, default=Path("/tmp/ng26/survey_results.json"))
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--reclassify", action="store_true", help="classify the --results of an earlier run again")
    args = parser.parse_args(argv)
    if args.probe:
        run_one(Path(args.probe[0]), Path(args.probe[1]))
    survey = {e["name"]: e for e in json.loads(args.survey.read_text())} if args.survey.is_file() else {}
    if args.reclassify:
        earlier = {r["env"]: r["results"] for r in json.loads(args.results.read_text())}
        rows = [classify_env(env, results, survey.get(env, {})) for env, results in earlier.items()]
        return report(rows, args, survey)
    with tempfile.TemporaryDirectory(prefix="nemo_env_survey_") as tmp:
        tree = port_tree(args.wheel, Path(tmp))
        envs = sorted(p for p in tree.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
        envs = [e for e in envs if args.only is None or e.name in args.only]
        with ThreadPoolExecutor(args.jobs) as pool:
            probed = list(pool.map(lambda e: probe_in_subprocess(e, Path(tmp)), envs))
    rows = [classify_env(e.name, res, survey.get(e.name, {})) for e, res in zip(envs, probed)]
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(rows, indent=1))
    return report(rows, args, survey)


def report(rows: list[dict[str, Any]], args: argparse.Namespace, survey: dict[str, dict[str, Any]]) -> int:
    if args.only is None:
        write_doc(args.doc, rows)
        write_missing(args.missing, rows, static_missing(survey))
    for r in rows:
        print(f"{r['env']:40} {r['status']:18} {r['configs']:6} {r['reason'][:110]}")
    good, pool_size, pct = percentage(rows)
    print(dict(Counter(r["status"] for r in rows)))
    print(f"no-service envs serving or loading: {good}/{pool_size} = {pct:.1f}%")
    good, pool_size, pct = percentage(rows, ("missing-dependency",))
    print(f"  ... of those with their dependencies installed: {good}/{pool_size} = {pct:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
