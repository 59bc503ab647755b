"""Differential test of a rollout's `ng_perf` (gym_metrics.recording.rollout_perf) against NeMo Gym
0.7.0's (`_build_ng_perf`, what its collection adds to a row from its `ng_trajectory` and wall
time, observability on) on random trajectories: each seed makes one, either from scratch (several
invocations of every status, some subagents; turns with and without model-call references, some
of other invocations or none; model calls with token counts of every kind: missing, null, bools,
numeric text, floats, negative, past 64 bits; references by call id, by model and response id,
to no call, to several, twice; tool calls of known and unknown invocations; gaps; conversation
items, some NeMo Gym refuses) or from a recorded case (tests/data/nemo_gym_perf/cases.jsonl,
scripts/make_nemo_perf_reference.py's) with odd values dropped in; with a latency of any kind
(none, 0, negative, NaN, infinite, an int, a bool, text). NeMo Gym's answers
(make_nemo_perf_reference.py's `nemo_perf`, one process for the batch) and ours are compared
exactly: the JSON of the block (keys, order, values and their JSON types: 3, not 3.0, not true),
or both giving none. A trajectory NeMo Gym's TrajectoryRecord refuses gets no `ng_perf` there
(counted apart: "NeMo Gym refuses"); ours must give none either.

    .venv/bin/python scripts/fuzz_nemo_perf.py --seeds 0:3000 --nemo-python /tmp/ngvenv/bin/python \
        [--keep DIR]   # DIR/<seed>.json gets each differing input and both answers

Exit 0 when every trajectory gives the same answer on both sides; 1 when one differs.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from fuzz_nemo_health import CONVERSATION, ODD, _mutate  # noqa: E402  (its odd values and item shapes, not a copy)

from gym_metrics.recording import rollout_perf  # noqa: E402

RECORDED = [json.loads(line) for line in (ROOT / "tests" / "data" / "nemo_gym_perf" / "cases.jsonl").read_text().splitlines()]
COUNTS: list[Any] = [None, 0, 1, 7, 250, 10**6, True, False, "5", " 12 ", "1_000", 3.0, -0.0, 2**63, 2**64 + 1, 10**30,  # NeMo Gym reads these
                     "x", "", -1, 2.5, 1e20, float("nan"), [], {}]  # and refuses these
ACCEPTED = 16
LATENCIES: list[Any] = [1834.25, None, 0, 0.0, -5.5, 7, True, "12", float("nan"), float("inf"), 10**20, 1e-300]
MODELS: list[Any] = [{"type": "responses_api_models", "name": "policy"}, {"type": "responses_api_models", "name": "judge"},
                     {"type": "responses_api_models", "name": "policy", "extra": 1}, {"type": "resources_servers", "name": "policy"}, None, "policy"]  # fmt: skip
STATUSES = ["completed", "failed", "incomplete", "unknown", "timeout", None]
INVOCATION_IDS = ["root", "sub", "sub2", "other"]


class Rng(random.Random):
    """A seed's generator, with how often it makes a value NeMo Gym refuses (0 for half the seeds)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.odd = self.choice([0.0, 0.0, 0.02, 0.05])


def _pick(rng: Rng, usual: Any, odd: float = 1.0) -> Any:
    return rng.choice(ODD) if rng.random() < odd * rng.odd else usual


def _model(rng: Rng) -> Any:
    return copy.deepcopy(rng.choice(MODELS) if rng.random() < 3 * rng.odd else rng.choice(MODELS[:3]))


def _count(rng: Rng) -> Any:
    roll = rng.random()
    return rng.choice(COUNTS) if roll < 3 * rng.odd else rng.choice(COUNTS[:ACCEPTED]) if roll < 0.15 else rng.randint(0, 900)


def _call(rng: Rng, n: int) -> dict[str, Any]:
    stats = {k: _count(rng) for k in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "total_tokens", "cached_tokens") if rng.random() < 0.85}
    if rng.random() < rng.odd:
        stats["audio_tokens"] = 1  # a field NeMo Gym's token stats forbid
    meta: dict[str, Any] = {"response_id": rng.choice([f"resp-{n}", f"resp-{n}", "resp-0", None, ""]), "model_ref": _model(rng)}
    if rng.random() < 0.2:
        meta["status_code"] = rng.choice([200, 500, None])
    call_id = "mc-0" if rng.random() < rng.odd else rng.choice([f"mc-{n}"] * 6 + [None, ""])  # mc-0 again: refused
    call: dict[str, Any] = {"model_call_id": call_id, "response_metadata": meta}
    if rng.random() < 0.9:
        call["token_stats"] = rng.choice([None, {}, "t"]) if rng.random() < rng.odd else stats
    return call


def _ref(rng: Rng, calls: list[dict[str, Any]]) -> dict[str, Any]:
    call: dict[str, Any] = rng.choice(calls) if calls and rng.random() < 0.85 else {"model_call_id": "nowhere", "response_metadata": {}}
    meta: dict[str, Any] = call.get("response_metadata") or {}
    shape = rng.random()
    if shape < 0.55 and call.get("model_call_id"):
        ref: dict[str, Any] = {"model_call_id": call.get("model_call_id")}
        if rng.random() < 0.3:  # the call's own model and response id, or others
            ref["model_ref"], ref["response_id"] = rng.choice([(meta.get("model_ref"), meta.get("response_id")), (_model(rng), rng.choice(["resp-0", None]))])
        return ref
    if shape < 1 - rng.odd:
        return {"model_call_id": rng.choice([None, ""]), "model_ref": meta.get("model_ref") or _model(rng), "response_id": meta.get("response_id") or "resp-0"}
    return rng.choice([{}, {"response_id": "resp-0"}, {"model_call_id": 5}, {"model_call_id": "mc-0", "extra": 1}])


def _trajectory(rng: Rng) -> dict[str, Any]:
    task, rollout = "t1", "t1-0"
    calls = [_call(rng, n) for n in range(rng.randint(0, 6))]
    ids = [INVOCATION_IDS[n] for n in range(rng.choice([0, 1, 1, 1, 2, 3]))]
    if ids and rng.random() < rng.odd:
        ids.append(ids[0])  # an id twice: refused
    invocations = []
    for i, at in enumerate(ids):
        invocation: dict[str, Any] = {"kind": "agent_invocation", "invocation_id": at, "status": rng.choice(STATUSES if rng.random() < 2 * rng.odd else STATUSES[:4]),
                                      "model_calls": [_ref(rng, calls) for _ in range(rng.choice([0, 1, 2, 3, 5]))],
                                      "conversation": [copy.deepcopy(rng.choice(CONVERSATION)) for _ in range(rng.randint(0, 3))]}  # fmt: skip
        if i:
            invocation.update(parent_invocation_id="root", spawned_by_tool_call_id=rng.choice(["tc-0", None]))
        invocations.append(invocation)
    turns = []
    for n in range(rng.randint(0, 5)):
        owner = rng.choice([*ids, "other"]) if ids and rng.random() < 0.9 else rng.choice(INVOCATION_IDS)
        turns.append({"invocation_id": owner, "task_id": _pick(rng, task, 0.3), "rollout_id": rollout, "turn_no": _pick(rng, n + 1, 0.5),
                      "timestamp": _pick(rng, 1795890893.5 + n, 0.5), "step_count": _pick(rng, n, 0.5),
                      "model_calls": [_ref(rng, calls) for _ in range(rng.choice([0, 1, 1, 2]))]})  # fmt: skip
    tools = [{"kind": "tool_call", "invocation_id": rng.choice([*ids, "other", "root"]), "tool_call_id": f"tc-{n}", "tool_name": "f",
              "status": rng.choice(STATUSES[:-1] + ["cancelled"]), "started_at": 10.0, "completed_at": _pick(rng, rng.choice([11.0, 12, None, 10]), 0.5),
              "duration_ms": _pick(rng, rng.choice([1000.0, None, 0, 5]))} for n in range(rng.randint(0, 4))]  # fmt: skip
    gaps = [{"code": rng.choice(["turns_unavailable", "model_calls_unavailable"]), "invocation_id": rng.choice([None, "root"])} for _ in range(rng.randint(0, 2))]
    out: dict[str, Any] = {"schema_version": "1.0", "task_id": task, "rollout_id": rollout, "invocations": invocations, "turns": turns,
                           "model_calls": calls, "tool_calls": tools, "gaps": gaps}  # fmt: skip
    for key in [k for k in ("turns", "model_calls", "tool_calls", "gaps", "invocations") if rng.random() < 0.03]:
        del out[key]
    return out


def case_for(seed: int) -> tuple[dict[str, Any], Any]:
    """Seed `seed`'s trajectory and latency (deterministic)."""
    rng = Rng(seed)
    if rng.random() < 0.3:
        trajectory = copy.deepcopy(rng.choice(RECORDED)["trajectory"])
        for call in trajectory.get("model_calls", []) if rng.random() < 0.7 else ():
            for key in list(call.get("token_stats") or {}):
                if rng.random() < 0.3:
                    call["token_stats"][key] = _count(rng)
    else:
        trajectory = _trajectory(rng)
    for _ in range(rng.choice([0, 1, 2]) if rng.random() < 4 * rng.odd else 0):
        _mutate(rng, trajectory)
    return trajectory, rng.choice(LATENCIES) if rng.random() < 0.4 else round(rng.uniform(0, 10**5), rng.randint(0, 6))


def ours(trajectory: dict[str, Any], latency: Any) -> dict[str, Any]:
    """Our answer, as NeMo Gym's answers read: the block (or None), or the exception's name."""
    try:
        return {"ng_perf": rollout_perf(copy.deepcopy(trajectory), latency)}
    except Exception as exc:  # noqa: BLE001 - a crash is an answer to compare
        return {"raised": type(exc).__name__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:1000", help="FIRST:STOP (default 0:1000)")
    parser.add_argument("--nemo-python", required=True, help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--keep", type=Path, help="write each differing input and both answers here")
    args = parser.parse_args(argv)
    first, stop = (int(x) for x in args.seeds.split(":"))
    cases = {seed: case_for(seed) for seed in range(first, stop)}
    lines = "".join(json.dumps({"trajectory": t, "latency_ms": latency}) + "\n" for t, latency in cases.values())
    made = subprocess.run([args.nemo_python, str(ROOT / "scripts" / "make_nemo_perf_reference.py"), "--stdin"], input=lines,
                          capture_output=True, text=True, check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    answers = [json.loads(line) for line in made.stdout.splitlines()]
    assert len(answers) == len(cases), made.stderr[-2000:]
    tally: Counter[str] = Counter()
    for (seed, (trajectory, latency)), theirs in zip(cases.items(), answers):
        mine = ours(trajectory, latency)
        if "raised" in theirs:
            tally[f"NeMo Gym raised {theirs['raised']}"] += 1
            continue
        refused = not theirs.pop("valid")
        if json.dumps(mine) == json.dumps(theirs):
            tally["NeMo Gym refuses, ours gives none" if refused else "the same" if theirs["ng_perf"] else "the same (none)"] += 1
            continue
        tally["differing"] += 1
        print(f"seed {seed}{' (NeMo Gym refuses the trajectory)' if refused else ''}: NeMo Gym {json.dumps(theirs)[:300]}; ours {json.dumps(mine)[:300]}")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            record = {"seed": seed, "trajectory": trajectory, "latency_ms": latency, "nemo_gym": theirs, "ours": mine, "refused": refused}
            (args.keep / f"{seed}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{stop - first} trajectories: " + ", ".join(f"{n} {what}" for what, n in tally.most_common()))
    return 1 if tally["differing"] else 0


if __name__ == "__main__":
    sys.exit(main())
