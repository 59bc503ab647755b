"""Record what NeMo Gym 0.7.0's collection writes for its own environments, and check `collect`
against it (issue 24, item 4: rows, samples and aggregated fields; item 5: re-scoring).

A tool for producing test data, not part of gym-metrics: it imports nemo-gym (NOT a project
dependency, Python >= 3.13) and the environments shipped in its wheel. Run it with a throwaway
interpreter that has nemo-gym and gym-metrics' dependencies, gym-metrics from this checkout:

    python3.13 -m venv /tmp/ngvenv
    /tmp/ngvenv/bin/pip install --ignore-requires-python nemo-gym==0.7.0 grpcio-health-checking \
        grpcio-reflection grpcio-status scipy jinja2 jsonpath-ng httpx
    PYTHONPATH=. /tmp/ngvenv/bin/python scripts/make_nemo_collection_reference.py

For each case (`string_match`, `mcqa`, `xlam_fc` with the rows of their `data/example.jsonl`,
each given the `response` of the `data/example_rollouts.jsonl` row for the same prompt; and
`xlam_fc_rescore`: `example_rollouts.jsonl` itself with `reward` removed) it writes
`tests/data/nemo_gym_collect/<case>/`:

- `input.jsonl`: the collect input (agent_ref and both `_ng_` indices stamped on each row);
- `verify_responses.jsonl`: per input line, what NeMo Gym's collection gets back from the
  agent's `/run` (below), before it adds its own keys;
- `rollouts.jsonl`: the rows NeMo Gym's collection writes (that, plus `_ng_task_index`,
  `_ng_rollout_index` and `agent_ref` from the input row, then `_ng_environment_server` and
  `_ng_result_type`, the environment server its own code resolves for the agent from the
  environment's shipped config, and that server's type: `nemo_gym/rollout_collection.py`);
- `aggregate_metrics.json`: NeMo Gym's metrics of those rows (stripped as its collection strips
  them before `/aggregate_metrics`, then `compute_aggregate_metrics` with the default hooks, as
  scripts/make_nemo_reference.py does), the reference `tests/collector/test_nemo_collect.py`
  compares `collect` with.

How a row gets its verify response, as NeMo Gym's `simple_agent` `/run` does it with the policy
call replaced by the recorded `response`: the row is parsed as `SimpleAgentRunRequest` (unknown
fields kept), `model_dump() | {"response": ...}` is POSTed to the environment's real FastAPI
app at `/verify` (its request model drops unknown fields), and the answer is validated as
`SimpleAgentVerifyResponse` and dumped as the agent's route answers.

Then, live, the same environments run inside gym-metrics (`collect` through a real gRPC server
whose `verify` does the steps above, and whose `compute_metrics` / `get_key_metrics` are the
environment's own): per-row rewards, rows and metrics (key sets and values) are compared with
NeMo Gym's (here with the environment's own hooks, as its `/aggregate_metrics` route computes
them); a summary is printed and the exit code is 1 on any difference.
"""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "nemo_gym_collect"
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "aggregate"))

ENVS = {
    "string_match": ("resources_servers.string_match.app", "StringMatchResourcesServer"),
    "mcqa": ("resources_servers.mcqa.app", "MCQAResourcesServer"),
    "xlam_fc": ("resources_servers.xlam_fc.app", "XlamFcResourcesServer"),
}


def _wheel_data(env: str) -> Path:
    import resources_servers

    return Path(next(iter(resources_servers.__path__))) / env / "data"  # a namespace package


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _prompt(row: dict[str, Any]) -> str:
    """The last user message's text: how an example row finds its example rollout."""
    texts = []
    for item in row["responses_create_params"]["input"]:
        if item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts = [content]
        else:
            texts = [c.get("text", "") for c in content if isinstance(c, dict)]
    return "\n".join(texts)


def cases() -> dict[str, tuple[str, list[dict[str, Any]]]]:
    out: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for env in ENVS:
        data = _wheel_data(env)
        answers = {_prompt(r): r["response"] for r in _read(data / "example_rollouts.jsonl")}
        rows = [
            {**row, "response": answers[_prompt(row)], "agent_ref": {"name": f"{env}_simple_agent"},
             "_ng_task_index": i, "_ng_rollout_index": 0}
            for i, row in enumerate(_read(data / "example.jsonl"))
            if _prompt(row) in answers
        ]  # fmt: skip
        out[env] = (env, rows)
    rescore = [
        {**{k: v for k, v in row.items() if k != "reward"}, "agent_ref": {"name": "xlam_fc_simple_agent"},
         "_ng_task_index": i, "_ng_rollout_index": 0}
        for i, row in enumerate(_read(_wheel_data("xlam_fc") / "example_rollouts.jsonl"))
    ]  # fmt: skip
    out["xlam_fc_rescore"] = ("xlam_fc", rescore)
    return out


class NemoEnv:
    """One NeMo Gym environment behind its own FastAPI app, and the agent step around `/verify`."""

    def __init__(self, env: str) -> None:
        import importlib
        from unittest.mock import MagicMock

        from fastapi.testclient import TestClient
        from nemo_gym.server_utils import ServerClient

        self.name = env
        module, name = ENVS[env]
        cls = getattr(importlib.import_module(module), name)
        config_cls = cls.model_fields["config"].annotation
        self.server = cls(
            config=config_cls(host="127.0.0.1", port=0, entrypoint="", name=env),
            server_client=MagicMock(spec=ServerClient),
        )
        self.client = TestClient(self.server.setup_webserver())

    def run(self, row: dict[str, Any]) -> dict[str, Any]:
        """What the agent's /run answers for this row (its policy call replaced by the row's response)."""
        from responses_api_agents.simple_agent.app import SimpleAgentRunRequest, SimpleAgentVerifyResponse

        body = SimpleAgentRunRequest.model_validate(row)
        answer = self.client.post("/verify", json=body.model_dump() | {"response": row["response"]})
        answer.raise_for_status()
        return SimpleAgentVerifyResponse.model_validate(answer.json()).model_dump(mode="json", by_alias=True)

    def aggregate(self, rows: list[dict[str, Any]], own_hooks: bool) -> dict[str, Any]:
        """NeMo Gym's metrics of an agent's rows: stripped as its collection strips them; through
        the environment's route (its hooks) or compute_aggregate_metrics (the default hooks)."""
        import orjson
        from make_nemo_reference import _plain, _strip
        from nemo_gym.reward_profile import compute_aggregate_metrics

        stripped = [orjson.loads(orjson.dumps(_strip(r))) for r in rows]
        if own_hooks:
            answer = self.client.post("/aggregate_metrics", json={"verify_responses": stripped})
            answer.raise_for_status()
            dumped = answer.json()
        else:
            dumped = compute_aggregate_metrics(stripped).model_dump()
        name = rows[0]["agent_ref"]["name"]
        keys = ("agent_metrics", "key_metrics", "group_level_metrics", "repeat_level_metrics")
        return _plain({"agent_ref": {"name": name}, **{k: dumped[k] for k in keys}})


def environment_server(env: str, agent: str) -> tuple[str, str]:
    """(name, type) of the environment server NeMo Gym's collection runs `agent`'s rows through,
    resolved by its own code from the environment's shipped config."""
    from nemo_gym.rollout_collection import _environment_server_for_agent, _environment_servers_by_agent
    from omegaconf import OmegaConf

    config = OmegaConf.load(_wheel_data(env).parent / "configs" / f"{env}.yaml")
    name = _environment_server_for_agent(agent, _environment_servers_by_agent(config))
    return name, str(next(iter(config[name]["environment_servers"])))


def nemo_row(row: dict[str, Any], result: dict[str, Any], server: tuple[str, str]) -> dict[str, Any]:
    """The row NeMo Gym's collection writes: the /run answer, its keys from the input row, then
    the environment server it ran through and that server's type."""
    written = dict(result)
    for key in ("_ng_task_index", "_ng_rollout_index", "agent_ref"):
        if key in row:
            written[key] = row[key]
    written["_ng_environment_server"], written["_ng_result_type"] = server
    return written


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def record(case: str, env: NemoEnv, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    results = [env.run(r) for r in rows]
    server = environment_server(env.name, rows[0]["agent_ref"]["name"])
    written = [nemo_row(r, res, server) for r, res in zip(rows, results)]
    folder = OUT / case
    folder.mkdir(parents=True, exist_ok=True)
    _jsonl(folder / "input.jsonl", rows)
    _jsonl(folder / "verify_responses.jsonl", results)
    _jsonl(folder / "rollouts.jsonl", written)
    metrics = [env.aggregate(written, own_hooks=False)]
    (folder / "aggregate_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return written, [env.aggregate(written, own_hooks=True)]


async def live(case: str, env: NemoEnv, folder: Path, tmp: Path) -> tuple[list[dict[str, Any]], Any]:
    """`collect` of the case's input through a gym-metrics server running the NeMo environment."""
    from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics._transport.server import ServerConfig, start_server
    from gym_metrics.collector import CollectOptions, collect_async

    class Live(SimpleResourcesServer):
        name = case

        async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
            return BaseVerifyResponse.model_validate(env.run(body.model_dump(mode="json")))

        def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
            return env.server.compute_metrics(tasks)

        def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
            return env.server.get_key_metrics(agent_metrics)

    out = tmp / f"{case}.jsonl"
    out.unlink(missing_ok=True)
    server = await start_server(Live(), ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            result = await collect_async(client, folder / "input.jsonl", out, CollectOptions())
    finally:
        await server.stop(0)
    return _read(out), json.loads(result.metrics_path.read_text())


def main() -> int:
    import tempfile

    from test_nemo_conformance import compare_files

    warnings.simplefilter("ignore")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case, (env_name, rows) in cases().items():
            env = NemoEnv(env_name)
            nemo_rows, nemo_metrics = record(case, env, rows)
            ours, metrics = asyncio.run(live(case, env, OUT / case, Path(tmp)))
            rewards = ([r["reward"] for r in nemo_rows], [r.get("reward") for r in ours])
            same_rows = [json.loads(json.dumps(r)) for r in nemo_rows] == ours
            problem = compare_files(nemo_metrics, metrics)
            failed += rewards[0] != rewards[1] or not same_rows or problem is not None
            print(f"{case}: {len(rows)} rows; rewards NeMo Gym {rewards[0]} gym-metrics {rewards[1]}; "
                  f"rows {'same' if same_rows else 'DIFFERENT'}; metrics {problem or 'same keys and values'}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
