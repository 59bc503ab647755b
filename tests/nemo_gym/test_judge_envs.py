"""NeMo Gym 0.7.0 environments that call an LLM judge through `server_client`, ported by rewriting
their imports, served by gym-metrics from their config YAML with the judge model server at a
scripted loopback judge (gym_metrics.testing), and collected: every row's verify answer and every
key of the metrics file equal NeMo Gym's against the same scripted judge
(tests/data/nemo_gym_judge/, recorded by scripts/make_nemo_judge_reference.py). One row per
environment has its judge answer HTTP 500: both score it reward 0, masked, judge_failed, and move
it to the `<stem>_failures.jsonl` sidecar, out of the rollouts and the metrics; then
`--reverify-failed` with a judge that answers scores it and folds it back."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from gym_metrics._transport.client import ResourcesClient
from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.testing import ScriptedChatServer, keyed_answers

sys.path.insert(0, str(Path(__file__).parents[1] / "aggregate"))
from test_nemo_conformance import compare_files  # noqa: E402

DATA = Path(__file__).parents[1] / "data" / "nemo_gym_judge"
ENVS = sorted(p.name for p in DATA.iterdir() if (p / "judge.json").is_file())
ECHOED = ("responses_create_params", "response")
JUDGE_ERROR_TEXT = ("failure_reason", "_ng_failure_judge_error")
"""The judge error's text: aiohttp's words under NeMo Gym, httpx's status line here."""

pytestmark = pytest.mark.slow


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


async def _collect(env: str, ported: Any, judge_url: str, out: Path, **options: Any) -> Any:
    meta, judge = (json.loads((DATA / env / name).read_text()) for name in ("meta.json", "judge.json"))
    config = ported.folder(meta["env"]) / "configs" / Path(meta["config_file"]).name
    server_impl = load_config_server(config, name=meta["server_instance"], servers={judge["server_name"]: judge_url})
    server = await start_server(server_impl, ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            source = out.with_name(out.stem + "_failures.jsonl") if options.get("reverify_failed") else DATA / env / "rollouts.jsonl"
            return await collect_async(client, source, out, CollectOptions(**options))
    finally:
        await server.stop(0)


def test_at_least_three_judge_environments_are_recorded() -> None:
    assert len(ENVS) >= 3, ENVS


@pytest.mark.parametrize("env", ENVS)
async def test_judge_env_rewards_and_metrics_equal_nemo_gym(env: str, ported: Any, tmp_path: Path) -> None:
    judge = json.loads((DATA / env / "judge.json").read_text())
    answer = keyed_answers(judge["answers"], fail_keys=judge["fail_keys"], fail_status=judge["fail_status"])
    with ScriptedChatServer(default=answer) as scripted:
        result = await _collect(env, ported, f"http://127.0.0.1:{scripted.port}", tmp_path / "out.jsonl")
    assert sorted({r.path for r in scripted.requests}) == judge["paths"]
    assert len(scripted.requests) == sum(judge["calls_per_row"])
    kept, sidecar, expected = _read(tmp_path / "out.jsonl"), _read(tmp_path / "out_failures.jsonl"), _read(DATA / env / "verify.jsonl")
    failed = sum(bool(r.get("_ng_failure_class")) for r in expected)
    assert failed >= 1 and len(sidecar) == failed == result.dropped["judge_failed"] and len(kept) + failed == len(expected)
    key = lambda r: (r["_ng_task_index"], r["_ng_rollout_index"])  # noqa: E731
    rows = sorted(kept + sidecar, key=key)  # the input's order (its rows are in key order)
    assert all(r.get("_ng_failure_class") for r in sidecar) and not any(r.get("_ng_failure_class") for r in kept)
    for i, (ours, theirs) in enumerate(zip(rows, expected)):
        assert ours["reward"] == pytest.approx(theirs["reward"], rel=1e-12, abs=0), (i, ours, theirs)
        for key, value in theirs.items():
            if key == "_echo_sha256" or (key in JUDGE_ERROR_TEXT and theirs.get("_ng_failure_class")):
                continue
            assert ours.get(key) == value, (i, key, ours.get(key), value)
        if theirs.get("_ng_failure_class"):  # aiohttp's text, as NeMo Gym's: only the judge's port differs
            port = lambda text: re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)  # noqa: E731
            assert port(ours["failure_reason"]) == port(theirs["failure_reason"]) and "500, message='Internal Server Error'" in ours["failure_reason"]
        assert all(key in ours for key in ECHOED if key in theirs.get("_echo_sha256", {}))
    ours = json.loads(result.metrics_path.read_text())
    assert not any(k.startswith("coverage/") for k in ours[0]["agent_metrics"])  # nothing masked is left
    reference = json.loads((DATA / env / "aggregate_metrics.json").read_text())
    assert compare_files(reference, ours) is None

    # NeMo Gym's `reverify --judge-failed-only`: the judge answers now; the failed rows are
    # scored, folded back into the rollouts, the sidecar emptied and the metrics made again
    with ScriptedChatServer(default=keyed_answers(judge["answers"])) as healthy:
        again = await _collect(env, ported, f"http://127.0.0.1:{healthy.port}", tmp_path / "out.jsonl", reverify_failed=True)
    assert len(healthy.requests) == sum(judge["calls_per_row"][i] for i, r in enumerate(_read(DATA / env / "verify.jsonl")) if r.get("_ng_failure_class"))
    recovered = _read(tmp_path / "out.jsonl")
    assert len(recovered) == len(expected) and again.dropped == {} and again.verified == failed
    assert not (tmp_path / "out_failures.jsonl").exists() and not (tmp_path / "out_failures.jsonl.reverifying").exists()
    assert not any(r.get("_ng_failure_class") or r.get("mask_sample") for r in recovered)
    metrics = json.loads(again.metrics_path.read_text())[0]
    assert metrics["agent_metrics"]["mean/reward"] == pytest.approx(sum(r["reward"] for r in recovered) / len(recovered))
