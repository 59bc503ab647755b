"""Record NeMo Gym 0.7.0's own verify responses and aggregate metrics for a suite of its
self-contained environments (issue 26: the reference the NeMo Gym conformance test compares with).

A tool for producing test data, not part of gym-metrics: it imports nemo-gym (NOT a project
dependency) and the environments of its wheel, and nothing of gym-metrics. Run it in a throwaway
venv that has nemo-gym 0.7.0 (and the few light deps some environments import), e.g.

    python3.13 -m venv /tmp/ngvenv && /tmp/ngvenv/bin/pip install nemo-gym==0.7.0
    /tmp/ngvenv/bin/python scripts/make_nemo_env_reference.py --wheel /tmp/nemo/wheel \
        --out tests/data/nemo_gym_envs            # write
    ... --check                                    # re-run NeMo Gym on what is written, compare

`--wheel` is the unzipped nemo-gym 0.7.0 wheel (`resources_servers/<env>/` is read from there).

Per environment, how the server is built (as `nemo_gym.server_utils.SimpleServer.run_webserver`
and `BaseServer.load_config_from_global_config` build it, minus HTTP):
- the config YAML is `configs/<env>.yaml`, else the first of `configs/*.yaml` by name, loaded
  with OmegaConf; the server's top-level instance key is the one whose block has
  `resources_servers`; its block is that block's first value's first value
  (`get_first_server_config_dict`), resolved with `OmegaConf.to_container(resolve=True)`;
- the server class is the one the env's `app.py` runs (`<Class>.run_webserver()` under
  `if __name__ == "__main__"`), imported as `resources_servers.<impl>.app`;
- `config = cls.model_fields["config"].annotation.model_validate(block | {"name": key,
  "host": "127.0.0.1", "port": 0})` (host and port are what the launcher fills in);
- `server = cls(config=config, server_client=ServerClient(head_server_config=
  BaseServerConfig(host="127.0.0.1", port=0), global_config_dict=OmegaConf.create(yaml)))`:
  a real ServerClient that self-contained environments never call.

Per row, verify is called in-process as the `/verify` route calls it: `judge_failsafe(server.verify)`
with the body validated as the route validates it (the annotation of verify's `body` parameter,
`model_validate` of the JSON); a verify that takes `(request, body)` gets a starlette Request whose
scope holds the session NeMo Gym's middleware gives a request without a cookie: a fresh dict
`{"session_id": <uuid>}` (uuid4 there; `uuid.UUID(int=row number)` here, so runs are identical).
The answer is recorded as `model_dump(mode="json")`; the script also POSTs the same body to the
environment's real FastAPI app (`setup_webserver()` under starlette's TestClient, no socket) and
records in meta.json whether the route's JSON equals the direct dump.

Rows (`ROWS_DOC` in scripts/nemo_env_rows.py lists the rules), task and rollout indices as NeMo Gym's collection
assigns them (`nemo_gym/rollout_collection.py`): a task index per distinct task row in order of
first appearance, rollout indices counted per task in file order; both written into each row.

Aggregation as the collection does it (`_call_aggregate_metrics`): each verify response plus the
row's `_ng_task_index`, `_ng_rollout_index` and `agent_ref`, stripped of `response` (but its usage
/ incomplete_details), `responses_create_params` and the trajectory keys, sent through JSON
(orjson), then `server.aggregate_metrics(AggregateMetricsRequest(verify_responses=...))` (the
environment's own compute_metrics / get_key_metrics / compute_repeat_metrics).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

ENVS = [
    "string_match", "mcqa", "equivalence_rule", "hotpotqa_qa", "xlam_fc",
    "single_step_tool_use_with_argument_comparison", "example_single_tool_call",
    "example_session_state_mgmt", "format_verification", "graphwalks",
    "gpqa_diamond", "example_tool_call_multireward", "spartqa", "bunsenbench_chemistry_mcq", "ragtruth",
    "lc_niah", "gui_coordinate",
]  # fmt: skip
DROPPED = {
    "math_advanced_calculations": "its example_rollouts.jsonl rows carry no ground_truth / id / depth / breadth "
    "(required by the verify request) and answer other prompts than data/example.jsonl's tasks",
    "structured_outputs": "its example_rollouts.jsonl rows carry no schema_str (required) and answer other "
    "prompts than data/example.jsonl's tasks (it also imports xmltodict / openapi_schema_validator)",
    "arc_agi": "runs, but 2 tasks of ~17 KB per row exceed the 200 KB size limit with 3 rollouts each",
}
"""Environments tried and left out, and why."""
NOTES = {
    "example_session_state_mgmt": "reward 0 on every row: verify reads the counter of the request's session, and a "
    "lone /verify has a fresh session (no seed_session / tool calls before it)",
    "mcqa": "task 2's recorded reward in example_rollouts.jsonl is 0 (extracted_answer null), 0.7.0's verify with "
    "example.jsonl's task (grading_mode strict_single_letter_boxed) gives 1",
    "lc_niah": "0.7.0's verify gives rewards other than those recorded in example_rollouts.jsonl (its reasoning "
    "overlap penalty differs from the recorded one)",
}
"""Where the references differ from the rewards recorded in the wheel's example_rollouts.jsonl, and why."""
ECHOED = ("responses_create_params", "response")
"""Keys of a verify response that echo the request: verify.jsonl stores their sha256 instead."""

from nemo_env_rows import ROWS_DOC, build_rows, read_jsonl, request_of  # noqa: E402  (scripts/)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def plain(value: Any) -> Any:
    """numpy scalars and tuples -> Python values, recursively."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def compact(response: dict[str, Any]) -> dict[str, Any]:
    """A verify response as verify.jsonl stores it: echoed keys as their sha256."""
    out = {k: v for k, v in response.items() if k not in ECHOED}
    out["_echo_sha256"] = {k: sha(response[k]) for k in ECHOED if k in response}
    return out


# ---------------------------------------------------------------- the server, as NeMo Gym builds it


def _nemo_side() -> Any:
    """gym_metrics/nemo_gym/_nemo_side.py, loaded by its path (it imports nothing of gym-metrics,
    which this venv has not): how NeMo Gym's launcher finds a config and its server class, and
    what its collection sends to /aggregate_metrics."""
    from reference_file import load_module

    return load_module(ROOT / "gym_metrics" / "nemo_gym" / "_nemo_side.py", "_nemo_side")


def config_path(wheel: Path, env: str) -> Path:
    return _nemo_side().config_file(wheel, env, None)


def server_class_name(app: Path) -> str:
    """The class `app.py` runs: `<Class>.run_webserver()` under `if __name__ == "__main__"`."""
    return _nemo_side().server_class_name(app)


class Env:
    """One environment's server instance, built from its YAML as NeMo Gym's launcher builds it."""

    def __init__(self, wheel: Path, env: str, config_file: Path | None = None) -> None:
        """`config_file`: one of the env's configs/ other than the one NeMo Gym's launcher picks."""
        import importlib

        from omegaconf import OmegaConf

        from nemo_gym.config_types import BaseServerConfig
        from nemo_gym.server_utils import ServerClient

        self.env, self.config_file = env, config_file or config_path(wheel, env)
        glob = OmegaConf.load(self.config_file)
        self.instance = next(k for k, v in glob.items() if hasattr(v, "keys") and "resources_servers" in v)
        impl_key, block = next(iter(glob[self.instance]["resources_servers"].items()))
        self.block: dict[str, Any] = OmegaConf.to_container(block, resolve=True)  # type: ignore[assignment]
        self.agent = next(
            (k for k, v in glob.items() if hasattr(v, "keys") and "responses_api_agents" in v
             and next(iter(v["responses_api_agents"].values())).get("resources_server", {}).get("name") == self.instance),
            f"{env}_simple_agent",
        )  # fmt: skip
        app = wheel / "resources_servers" / impl_key / self.block["entrypoint"]
        self.module = f"resources_servers.{impl_key}.{Path(self.block['entrypoint']).stem}"
        self.class_name = server_class_name(app)
        sys.path.insert(0, str(app.parent))  # NeMo Gym runs the entrypoint as a script: its folder is on the path (citation_if's `from scorer import`)
        try:
            cls = getattr(importlib.import_module(self.module), self.class_name)
        finally:
            sys.path.remove(str(app.parent))
        config_cls = cls.model_fields["config"].annotation
        config = config_cls.model_validate(self.block | {"name": self.instance, "host": "127.0.0.1", "port": 0})
        client = ServerClient(
            head_server_config=BaseServerConfig(host="127.0.0.1", port=0), global_config_dict=OmegaConf.create(glob)
        )
        self.server = cls(config=config, server_client=client)
        self.config_class = f"{config_cls.__module__}.{config_cls.__qualname__}"

    def verify_params(self) -> tuple[Any, bool]:
        """(the body model the /verify route validates with, whether verify takes a Request)."""
        import inspect
        import typing

        params = inspect.signature(self.server.verify).parameters
        hints = typing.get_type_hints(self.server.verify)  # resolves `from __future__ import annotations`
        return hints["body"], "request" in params

    def response_only_fields(self) -> set[str]:
        import typing

        body_model, _ = self.verify_params()
        hints = typing.get_type_hints(self.server.verify)
        out_model = hints.get("return")
        out = set(getattr(out_model, "model_fields", {})) | {"reward", "mask_sample", "failure_kind", "failure_reason"}
        return out - set(body_model.model_fields)

    def verify(self, body: dict[str, Any], row_number: int) -> dict[str, Any]:
        """NeMo Gym's verify of one request body, called in-process as the /verify route calls it."""
        from starlette.requests import Request

        from nemo_gym.judge import judge_failsafe
        from nemo_gym.server_utils import SESSION_ID_KEY

        model, takes_request = self.verify_params()
        args: list[Any] = []
        if takes_request:
            session = {SESSION_ID_KEY: str(uuid.UUID(int=row_number))}
            args.append(Request({"type": "http", "method": "POST", "path": "/verify", "headers": [], "session": session}))
        result = asyncio.run(judge_failsafe(self.server.verify)(*args, body=model.model_validate(body)))
        if hasattr(result, "body") and not hasattr(result, "model_dump"):  # judge_failsafe's JSONResponse
            return json.loads(result.body)
        return result.model_dump(mode="json")

    def route_verify(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The same bodies POSTed to the environment's own FastAPI app (in-process TestClient)."""
        from fastapi.testclient import TestClient

        with TestClient(self.server.setup_webserver()) as client:
            out = []
            for body in bodies:
                answer = client.post("/verify", json=body)
                answer.raise_for_status()
                out.append(answer.json())
                client.cookies.clear()  # each rollout its own session, as separate agent calls
        return out

    def aggregate(self, rows: list[dict[str, Any]], responses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The environment's /aggregate_metrics of the responses, as the collection calls it: one
        entry, shaped as the collection's `_aggregate_metrics.json` (minus `_ng_environment_server`
        and `perf_summary`)."""
        import orjson

        from nemo_gym.config_types import AggregateMetricsRequest

        stripped = [orjson.loads(orjson.dumps(strip(resp | keys_of(row)))) for row, resp in zip(rows, responses)]
        result = asyncio.run(self.server.aggregate_metrics(AggregateMetricsRequest(verify_responses=stripped)))
        dumped = result.model_dump(mode="json")
        keys = ("agent_metrics", "key_metrics", "group_level_metrics", "repeat_level_metrics")
        return plain([{"agent_ref": {"name": self.agent}, **{k: dumped[k] for k in keys}}])


def keys_of(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("_ng_task_index", "_ng_rollout_index", "agent_ref") if k in row}


def strip(row: dict[str, Any]) -> dict[str, Any]:
    """What the collection sends to /aggregate_metrics for one result row."""
    return _nemo_side().strip(row)


# ---------------------------------------------------------------- recording and checking


def run_env(env: Env, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """(verify responses, aggregate metrics, whether the /verify route's JSON equals the direct dump)."""
    responses = [env.verify(request_of(row), i) for i, row in enumerate(rows)]
    routed = env.route_verify([request_of(row) for row in rows])
    return responses, env.aggregate(rows, responses), routed == responses


def record(wheel: Path, out: Path, name: str) -> dict[str, Any]:
    import importlib.metadata

    env = Env(wheel, name)
    rows, applied = build_rows(env, wheel / "resources_servers" / name / "data")
    responses, metrics, route_equal = run_env(env, rows)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(env.config_file, folder / "config.yaml")
    write_jsonl(folder / "rollouts.jsonl", rows)
    write_jsonl(folder / "verify.jsonl", [compact(r) for r in responses])
    (folder / "aggregate_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    meta = {
        "env": name,
        "config_file": f"resources_servers/{name}/configs/{env.config_file.name}",
        "server_instance": env.instance,
        "agent": env.agent,
        "entrypoint": env.block["entrypoint"],
        "module": env.module,
        "class": env.class_name,
        "config_class": env.config_class,
        "verify_takes_request": env.verify_params()[1],
        "nemo_gym_version": importlib.metadata.version("nemo-gym"),
        "rows": len(rows),
        "tasks": len({r["_ng_task_index"] for r in rows}),
        "rewards": [r.get("reward") for r in responses],
        "route_json_equals_direct_dump": route_equal,
        "sanitising": sorted(applied),
        "verify_jsonl_note": "echoed keys responses_create_params / response stored as _echo_sha256 "
        "(sha256 of json.dumps(value, sort_keys=True, ensure_ascii=False))",
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def check(wheel: Path, out: Path, name: str) -> list[str]:
    """Re-run NeMo Gym on the written rollouts; the differences from the written files."""
    folder = out / name
    env = Env(wheel, name)
    rows = read_jsonl(folder / "rollouts.jsonl")
    responses, metrics, _ = run_env(env, rows)
    problems = []
    if json.loads(json.dumps(build_rows(env, wheel / "resources_servers" / name / "data")[0])) != rows:
        problems.append("rollouts.jsonl differs from the rows built again")
    if [compact(r) for r in responses] != read_jsonl(folder / "verify.jsonl"):
        problems.append("verify.jsonl differs")
    if json.loads(json.dumps(metrics)) != json.loads((folder / "aggregate_metrics.json").read_text()):
        problems.append("aggregate_metrics.json differs")
    return problems


def run(
    record_env: Any, check_env: Any, envs: list[str], out: Path, describe: Any, readme: Any = None
) -> int:
    """The command line both reference scripts share: record (or `--check`) each environment;
    `describe(meta)` is the line printed for one recorded; one that cannot run is reported."""
    parser = argparse.ArgumentParser(description=(sys.modules["__main__"].__doc__ or "").splitlines()[0])
    parser.add_argument("--wheel", type=Path, required=True, help="the unzipped nemo-gym 0.7.0 wheel")
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--check", action="store_true", help="re-run and compare with the written files")
    parser.add_argument("envs", nargs="*", default=envs)
    args = parser.parse_args()
    import nemo_gym  # noqa: F401  (the venv's nemo_gym first; then the wheel's resources_servers)

    sys.path.insert(1, str(args.wheel.resolve()))
    warnings.simplefilter("ignore")
    failed = 0
    for name in args.envs:
        try:
            if args.check:
                problems = check_env(args.wheel, args.out, name)
                failed += bool(problems)
                print(f"{name}: {'; '.join(problems) or 'identical'}")
            else:
                print(f"{name}: {describe(record_env(args.wheel, args.out, name))}")
        except Exception as e:  # an environment that cannot run is reported, not recorded
            failed += 1
            print(f"{name}: FAILED {type(e).__name__}: {e}"[:800])
    if readme is not None and not args.check:
        readme(args.out)
    return 1 if failed else 0


def main() -> int:
    return run(
        record, check, ENVS, Path("tests/data/nemo_gym_envs"),
        lambda meta: f"{meta['rows']} rows, {meta['tasks']} tasks, rewards {meta['rewards']}, "
        f"route==direct {meta['route_json_equals_direct_dump']}",
        write_readme,
    )  # fmt: skip


def write_readme(out: Path) -> None:
    """README.md of the reference folder: how it was made, one line per environment."""
    lines = [
        "# NeMo Gym 0.7.0 environment references (issue 26)",
        "",
        "NeMo Gym's own verify responses and aggregate metrics for self-contained environments of the",
        "nemo-gym 0.7.0 wheel, recorded in-process by `scripts/make_nemo_env_reference.py` (its docstring",
        "says how each server is built from its YAML and called) in a throwaway nemo-gym venv:",
        "",
        "    /tmp/ngvenv/bin/python scripts/make_nemo_env_reference.py --wheel /tmp/nemo/wheel --out tests/data/nemo_gym_envs",
        "    /tmp/ngvenv/bin/python scripts/make_nemo_env_reference.py --wheel /tmp/nemo/wheel --out tests/data/nemo_gym_envs --check",
        "",
        "Per environment: `config.yaml` (the env's config, copied), `rollouts.jsonl` (collect's input: the",
        "verify request body + agent_ref + `_ng_task_index` / `_ng_rollout_index`), `verify.jsonl` (NeMo",
        "Gym's verify response per row, same order; `responses_create_params` / `response` as sha256 in",
        "`_echo_sha256`), `aggregate_metrics.json` (its /aggregate_metrics: agent_metrics, key_metrics,",
        "group_level_metrics, repeat_level_metrics) and `meta.json` (how it was built, rules applied).",
        "",
        "How rows are made:",
        "",
        *ROWS_DOC.splitlines(),
        "",
        "| env | class | rows | tasks | mean reward | rewards seen |",
        "|---|---|---|---|---|---|",
    ]
    for meta_path in sorted(out.glob("*/meta.json")):
        m = json.loads(meta_path.read_text())
        rewards = m["rewards"]
        seen = ", ".join(f"{r:g}" for r in sorted(set(rewards)))
        lines.append(f"| {m['env']} | {m['class']} | {m['rows']} | {m['tasks']} | {sum(rewards) / len(rewards):.4g} | {seen} |")
    lines += ["", "Notes:", ""] + [f"- {k}: {v}" for k, v in NOTES.items()]
    lines += ["", "Left out:", ""] + [f"- {k}: {v}" for k, v in DROPPED.items()]
    (out / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
