"""Record NeMo Gym 0.7.0's verify responses and aggregate metrics for environments that call an LLM
judge through `server_client`, against the scripted judge of gym_metrics.testing (issue 26: the
reference tests/nemo_gym/test_judge_envs.py compares with).

A tool for producing test data, run in the throwaway nemo-gym venv as
scripts/make_nemo_env_reference.py is (whose server building, rows and aggregation it reuses):

    /tmp/ngvenv/bin/python scripts/make_nemo_judge_reference.py --wheel /tmp/nemo/wheel \
        --out tests/data/nemo_gym_judge            # write
    ... --check                                    # re-run NeMo Gym on what is written, compare

The judge: gym_metrics/testing/_judge.py, loaded as a file (standard library only, so nothing else
of gym-metrics is imported here): `ScriptedChatServer(default=keyed_answers(answers, fail_keys=...))`
on 127.0.0.1, answering each request by the sha256 of its message texts (same prompt, same verdict,
whatever the order or the run); `judge.json` holds `answers` and `fail_keys`. The failing key is
chosen by a first pass: the first judge prompt of row FAILING_ROW, so that row's judge call gets
HTTP 500 and NeMo Gym's judge_failsafe scores it (reward 0, `_ng_failure_class` "judge_failed").

NeMo Gym's server reaches the judge as its launcher makes it: the global config dict gets the judge's
block, `<judge name>: responses_api_models: scripted_judge: {host: 127.0.0.1, port: <port>}`, and the
real `nemo_gym.server_utils.ServerClient` resolves `http://host:port` + the env's url_path from it.

Verify: every row in one event loop (NeMo Gym's aiohttp client is per loop), one at a time, as the
/verify route calls it (`judge_failsafe(server.verify)`). Aggregation as the collection does it, of
the rows NeMo Gym keeps in its main output: a row with `_ng_failure_class` goes to the failures
sidecar and is left out of /aggregate_metrics (`rollout_collection.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import shutil
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from make_nemo_env_reference import Env, compact, write_jsonl  # noqa: E402
from make_nemo_env_reference import run as run_cli  # noqa: E402
from nemo_env_rows import build_rows, read_jsonl, request_of  # noqa: E402

ANSWERS = {
    "simpleqa": ["A", "B", "C"],
    "text_to_sql": ["[[A=B]]", "[[A!=B]]"],
    "inverse_if": ['{"result": "PASS"}', '{"result": "FAIL"}'],
    "frontierscience_judge": ["Judgement: YES", "Judgement: NO"],
    "abstention": ["CORRECT", "INCORRECT", "NOT_ATTEMPTED"],
}
"""Per environment, the judge answers keyed_answers picks from (the verdict formats each parses)."""
FAILING_ROW = 1
"""The row whose (first) judge prompt the judge answers HTTP 500."""


def load_judge_module() -> Any:
    """gym_metrics/testing/_judge.py as a standalone module (standard library only)."""
    spec = importlib.util.spec_from_file_location("scripted_judge", ROOT / "gym_metrics" / "testing" / "_judge.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class JudgeEnv(Env):
    """An environment built as Env builds it, its judge model server pointed at `port`."""

    def __init__(self, wheel: Path, env: str, port: int) -> None:
        from omegaconf import OmegaConf

        from nemo_gym.config_types import BaseServerConfig
        from nemo_gym.server_utils import ServerClient

        super().__init__(wheel, env)
        self.judge_name = self.block["judge_model_server"]["name"]
        glob = OmegaConf.to_container(OmegaConf.load(self.config_file), resolve=False)
        glob[self.judge_name] = {"responses_api_models": {"scripted_judge": {"host": "127.0.0.1", "port": port}}}  # type: ignore[index]
        self.server.server_client = ServerClient(
            head_server_config=BaseServerConfig(host="127.0.0.1", port=0), global_config_dict=OmegaConf.create(glob)
        )

    async def verify_async(self, body: dict[str, Any], row_number: int) -> dict[str, Any]:
        from starlette.requests import Request

        from nemo_gym.judge import judge_failsafe
        from nemo_gym.server_utils import SESSION_ID_KEY

        model, takes_request = self.verify_params()
        args: list[Any] = []
        if takes_request:
            session = {SESSION_ID_KEY: str(uuid.UUID(int=row_number))}
            args.append(Request({"type": "http", "method": "POST", "path": "/verify", "headers": [], "session": session}))
        result = await judge_failsafe(self.server.verify)(*args, body=model.model_validate(body))
        if hasattr(result, "body") and not hasattr(result, "model_dump"):  # judge_failsafe's JSONResponse
            return json.loads(result.body)
        return result.model_dump(mode="json")


def run(wheel: Path, name: str, rows: list[dict[str, Any]] | None, fail_keys: list[str]) -> dict[str, Any]:
    """One pass of NeMo Gym over the rows (built from the example data when None): the rows, verify
    answers, judge texts per row, metrics of the kept rows."""
    judge_module = load_judge_module()
    answer = judge_module.keyed_answers(ANSWERS[name], fail_keys=fail_keys)
    with judge_module.ScriptedChatServer(default=answer) as judge:
        env = JudgeEnv(wheel, name, judge.port)
        if rows is None:
            rows = build_rows(env, wheel / "resources_servers" / name / "data")[0]
        texts: list[list[str]] = []

        async def verify_all() -> list[dict[str, Any]]:
            from nemo_gym import server_utils

            # NeMo Gym's aiohttp client with its default settings (it would otherwise read the
            # global config from the command line), made in this loop and closed with it.
            client = server_utils.set_global_aiohttp_client(server_utils.GlobalAIOHTTPAsyncClientConfig())
            out = []
            try:
                for i, row in enumerate(rows):
                    seen = len(judge.requests)
                    out.append(await env.verify_async(request_of(row), i))
                    texts.append([r.text for r in judge.requests[seen:]])
            finally:
                await client.close()
                server_utils._GLOBAL_AIOHTTP_CLIENT = None
            return out

        responses = asyncio.run(verify_all())
        paths = sorted({r.path for r in judge.requests})
    kept = [(row, resp) for row, resp in zip(rows, responses) if resp.get("_ng_failure_class") is None]
    metrics = env.aggregate([r for r, _ in kept], [s for _, s in kept])
    return {"env": env, "rows": rows, "responses": responses, "texts": texts, "metrics": metrics, "paths": paths}


def record(wheel: Path, out: Path, name: str) -> dict[str, Any]:
    import importlib.metadata

    judge_module = load_judge_module()
    first = run(wheel, name, None, [])
    fail_keys = [judge_module.text_key(first["texts"][FAILING_ROW][0])]
    final = run(wheel, name, first["rows"], fail_keys)
    env, rows, responses = final["env"], final["rows"], final["responses"]
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(env.config_file, folder / "config.yaml")
    write_jsonl(folder / "rollouts.jsonl", rows)
    write_jsonl(folder / "verify.jsonl", [compact(r) for r in responses])
    (folder / "aggregate_metrics.json").write_text(json.dumps(final["metrics"], indent=2) + "\n", encoding="utf-8")
    judge = {"server_name": env.judge_name, "answers": ANSWERS[name], "fail_keys": fail_keys, "fail_status": 500,
             "paths": final["paths"], "calls_per_row": [len(t) for t in final["texts"]]}  # fmt: skip
    (folder / "judge.json").write_text(json.dumps(judge, indent=2) + "\n", encoding="utf-8")
    meta = {
        "env": name,
        "config_file": f"resources_servers/{name}/configs/{env.config_file.name}",
        "server_instance": env.instance,
        "agent": env.agent,
        "class": env.class_name,
        "nemo_gym_version": importlib.metadata.version("nemo-gym"),
        "rows": len(rows),
        "tasks": len({r["_ng_task_index"] for r in rows}),
        "rewards": [r.get("reward") for r in responses],
        "judge_failed_rows": [i for i, r in enumerate(responses) if r.get("_ng_failure_class")],
        "aggregated_rows": "the rows without _ng_failure_class (NeMo Gym's main output; failures go to its sidecar)",
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def portless(rows: list[dict[str, Any]]) -> str:
    """The rows as JSON with the judge's port left out (a judge error's text names its URL)."""
    import re

    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", json.dumps(rows, sort_keys=True))


def check(wheel: Path, out: Path, name: str) -> list[str]:
    folder = out / name
    judge = json.loads((folder / "judge.json").read_text())
    final = run(wheel, name, read_jsonl(folder / "rollouts.jsonl"), judge["fail_keys"])
    problems = []
    if portless([compact(r) for r in final["responses"]]) != portless(read_jsonl(folder / "verify.jsonl")):
        problems.append("verify.jsonl differs")
    if json.loads(json.dumps(final["metrics"])) != json.loads((folder / "aggregate_metrics.json").read_text()):
        problems.append("aggregate_metrics.json differs")
    return problems


def main() -> int:
    return run_cli(
        record, check, list(ANSWERS), Path("tests/data/nemo_gym_judge"),
        lambda meta: f"{meta['rows']} rows, rewards {meta['rewards']}, judge failed {meta['judge_failed_rows']}",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
