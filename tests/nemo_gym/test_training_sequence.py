"""Training rollouts equal NeMo Gym's, and their training sequence NeMo RL's (issue 39, done-when
2): NeMo Gym's counter environment (example_session_state_mgmt, ported by its imports), collected
with `--capture-tokens` against the scripted vLLM-like policy NeMo Gym's own recording used
(tests/data/nemo_gym_tokens: its simple_agent through its vllm_model server,
scripts/make_nemo_token_reference.py). Every turn's token IDs and log-probs on every output item
equal NeMo Gym's, and `recording.linearize` of each row is the sequence NeMo RL's own
`_postprocess_nemo_gym_to_nemo_rl_result` built from NeMo Gym's answer for the same episode
(nemo_rl_message_logs.jsonl, scripts/make_nemo_rl_sequence_reference.py): the same token IDs,
the loss on exactly its assistant messages' tokens, their log-probs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.recording import TOKEN_FIELDS, linearize
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment

ENV = "example_session_state_mgmt"
DATA = Path(__file__).parents[1] / "data" / "nemo_gym_tokens" / ENV
AGENT = Path(__file__).parents[1] / "data" / "nemo_gym_agent" / ENV


def _read(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def collected(ported: Any, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The rows collected once for both tests (a sync fixture running its own loop: module scope)."""
    return asyncio.run(collect(ported, tmp_path_factory.mktemp("tokens") / "out.jsonl"))


async def collect(ported: Any, out: Path) -> list[dict[str, Any]]:
    meta = json.loads((AGENT / "meta.json").read_text())
    server = load_config_server(ported.folder(ENV) / "configs" / Path(meta["config_file"]).name, name=meta["resources_server_instance"])
    script = json.loads((AGENT / "policy.json").read_text())
    with ScriptedPolicyServer({p: [PolicyAnswer(**s) for s in steps] for p, steps in script.items()}) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="chat")
        async with serve_environment(server) as running, ResourcesClient(running.address) as client:
            result = await collect_async(client, DATA / "rows.jsonl", out, CollectOptions(target=target, capture_tokens=True))
    assert result.token_gaps == 0 and result.generation_failed == 0
    by_key = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in _read(out)}
    return [by_key[(r["_ng_task_index"], r["_ng_rollout_index"])] for r in _read(DATA / "rows.jsonl")]


def tokens_of(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Per output item, its type and its token fields (None where NeMo Gym writes null)."""
    return [{"type": item["type"], **{k: item.get(k) for k in TOKEN_FIELDS}} for item in row["response"]["output"]]


def scrubbed(ours: Any, theirs: Any) -> Any:
    """`ours` with the reference's placeholders ("<time>", "resp_<id>": what its recording
    replaced) put where the reference has them, so the rest compares exactly."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return {k: scrubbed(v, theirs[k]) if k in theirs else v for k, v in ours.items()}
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [scrubbed(a, b) for a, b in zip(ours, theirs)]
    return theirs if isinstance(theirs, str) and "<" in theirs and isinstance(ours, (str, int, float)) else ours


def test_every_items_token_fields_equal_nemo_gyms(collected: list[dict[str, Any]]) -> None:
    expected = _read(DATA / "verify.jsonl")
    assert len(collected) == len(expected) == 10
    for n, (ours, theirs) in enumerate(zip(collected, expected)):
        assert tokens_of(ours) == tokens_of(theirs), n
        assert ours["reward"] == theirs["reward"], n
    assert sum(1 for row in expected for item in row["response"]["output"] if item.get("generation_token_ids")) >= 30


def test_every_response_equals_nemo_gyms_key_for_key(collected: list[dict[str, Any]]) -> None:
    """The whole response (NeMo Gym's typed items dump `routed_experts: null` beside token IDs
    the policy gave without it; the reference's keys are sorted, so their order is not compared)."""
    for n, (ours, theirs) in enumerate(zip(collected, _read(DATA / "verify.jsonl"))):
        assert scrubbed(ours["response"], theirs["response"]) == theirs["response"], n


def test_the_training_sequence_is_the_one_nemo_rl_builds(collected: list[dict[str, Any]]) -> None:
    logs = _read(DATA / "nemo_rl_message_logs.jsonl")
    assert len(logs) == len(collected)
    for n, (row, log) in enumerate(zip(collected, logs)):
        sequence = linearize(row)
        assert sequence.token_ids == [t for m in log for t in m["token_ids"]], n
        assert sequence.loss_mask == [int(m["role"] == "assistant") for m in log for _ in m["token_ids"]], n
        trained = [round(p, 6) for p, mask in zip(sequence.log_probs, sequence.loss_mask) if mask]
        assert trained == [p for m in log if m["role"] == "assistant" for p in m["generation_logprobs"]], n
        assert all(p == 0.0 for p, mask in zip(sequence.log_probs, sequence.loss_mask) if not mask), n
