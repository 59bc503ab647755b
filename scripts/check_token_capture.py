"""Token capture checked at scale (issue 39, "done when"): --episodes multi-turn episodes through
`collect --capture-tokens --capture-payloads` against the scripted vLLM-like policy
(gym_metrics.testing: exact byte-level token IDs, a known log-prob per token), every tenth
episode scripted to send one turn's log-probs one short and to change its template's history
rendering from its third turn on.

    python scripts/check_token_capture.py [--episodes 10000] [--concurrency 32]

Checked, per row: every policy request made for it is one captured call; every turn's token
fields on its last output item equal what the policy sent (read back from the captured
answer) and the log-probs are the scripted ones; its gaps are exactly the scripted faults.
Prints the counts; exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_tool_call_order import ENV, serve, write_episode_rows  # noqa: E402

FAULTY = re.compile(r"episode \d*0$")


def steps(prompt: str) -> list[Any]:
    from gym_metrics.testing import PolicyAnswer

    out = [PolicyAnswer(tool_calls=[{"name": "lookup", "arguments": {"key": k}}]) for k in range(3)] + [PolicyAnswer(text="done")]
    if FAULTY.search(prompt):
        out[1].token_fault = "short_log_probs"
        for step in out[2:]:
            step.token_fault = "break_lineage"
    return out


async def run(address: str, policy_url: str, rows: Path, out: Path, concurrency: int) -> Any:
    from gym_metrics import ResourcesClient
    from gym_metrics.collector import CollectOptions, collect_async
    from gym_metrics.targets import ModelTargetConfig

    target = ModelTargetConfig(url=policy_url, model="scripted", api="chat", max_concurrency=concurrency)
    async with ResourcesClient(address) as client:
        return await collect_async(client, rows, out, CollectOptions(target=target, capture_tokens=True, capture_payloads=True))


def check(out: Path, requests: int) -> dict[str, int]:
    from gym_metrics.targets import chat_token_fields
    from gym_metrics.testing._tokens import log_prob

    counts = {"rows": 0, "calls": 0, "turns": 0, "token_ids": 0, "mismatches": 0, "gaps": 0, "gaps_expected": 0, "gaps_wrong": 0}
    with out.open() as f:
        for line in f:
            row = json.loads(line)
            counts["rows"] += 1
            capture = row["ng_model_call_capture"]
            calls = [c for c in capture["calls"] if c["status_code"] == 200]
            counts["calls"] += len(capture["calls"])
            carriers = [i for i in row["response"]["output"] if "prompt_token_ids" in i]
            counts["mismatches"] += len(carriers) != len(calls)
            for item, call in zip(carriers, calls):
                sent = chat_token_fields(call["response"])
                ids, probs = item["generation_token_ids"], item["generation_log_probs"]
                counts["turns"] += 1
                counts["token_ids"] += len(ids) + len(item["prompt_token_ids"])
                counts["mismatches"] += {k: item[k] for k in sent} != sent
                counts["mismatches"] += probs != [log_prob(t, k) for k, t in enumerate(ids)][: len(probs)]
            faulty = FAULTY.search(row["responses_create_params"]["input"]) is not None
            codes = [g["code"] for g in capture.get("gaps", [])]
            expected = ["token_log_probs_length_mismatch", "token_lineage_break"] if faulty else []
            counts["gaps"] += len(codes)
            counts["gaps_expected"] += len(expected)
            counts["gaps_wrong"] += codes != expected
    counts["policy_requests"] = requests
    counts["mismatches"] += counts["calls"] != requests
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    ns = parser.parse_args()
    from gym_metrics.testing import ScriptedPolicyServer

    with tempfile.TemporaryDirectory() as tmp, ScriptedPolicyServer(steps) as policy:
        work = Path(tmp)
        rows = write_episode_rows(work / "rows.jsonl", ns.episodes)
        env = work / "env.py"
        env.write_text(ENV.format(delay=0.0))
        proc, address = serve(env)
        try:
            start = time.perf_counter()
            result = asyncio.run(run(address, policy.url, rows, work / "out.jsonl", ns.concurrency))
            seconds = time.perf_counter() - start
        finally:
            proc.terminate()
            proc.wait(15)
        counts = check(work / "out.jsonl", len(policy.requests))
    counts["token_gaps_reported"] = result.token_gaps
    print(json.dumps(counts, indent=1))
    print(f"{ns.episodes:,} episodes in {seconds:.0f} s ({ns.episodes / seconds:,.0f} episodes/s)")
    bad = counts["mismatches"] or counts["gaps_wrong"] or counts["gaps"] != counts["gaps_expected"] or result.token_gaps != counts["gaps"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
