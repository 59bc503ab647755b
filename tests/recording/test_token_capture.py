"""Token IDs and log-probs (issue 39 item 2): collect --capture-tokens over multi-turn
episodes of a real tool environment (served on loopback) against a scripted vLLM-like policy
(gym_metrics.testing: exact byte-level token IDs over a chat template, log-probs known per
token). Every turn's fields are on its last output item exactly as the policy sent them, the
next request carries them back, and every fault the policy was scripted to make is a gap
(none invented)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _ci
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "collector"))
from test_collect_episodes import script, write_rows  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import Counter  # noqa: E402

from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.recording import CAPTURE_KEY, token_gaps
from gym_metrics.recording._items import as_dumped
from gym_metrics.targets import Exchange, ModelTargetConfig, TokenInfoError, chat_token_fields
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment
from gym_metrics.testing._tokens import log_prob

pytestmark = pytest.mark.timeout(120)
FAULTY = re.compile(r"Task (\d+), rollout 1:")
"""Rollout 1 of every task: its second turn's log-probs are one short, and from its third turn
on the template renders the history differently (a token more at its start: one break, where
it changes, as a chat template that re-renders earlier turns makes it)."""


def faulty_script(prompt: str) -> list[Any]:
    steps = script(prompt)
    if FAULTY.match(prompt):
        steps[1].token_fault = "short_log_probs"
        for step in steps[2:]:
            step.token_fault = "break_lineage"
    return steps


async def collect(tmp_path: Path, tasks: int, repeats: int, policy: ScriptedPolicyServer) -> tuple[Any, list[dict[str, Any]]]:
    rows = write_rows(tmp_path / "rows.jsonl", tasks=tasks, repeats=repeats)
    target = ModelTargetConfig(url=policy.url, model="scripted", api="chat", max_concurrency=16)
    async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
        result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target, capture_tokens=True, capture_payloads=True))
    return result, [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]


async def test_every_turns_tokens_are_written_as_sent_and_faults_become_gaps(tmp_path: Path) -> None:
    with ScriptedPolicyServer(faulty_script) as policy:
        result, rows = await collect(tmp_path, tasks=6, repeats=3, policy=policy)
        requests = list(policy.requests)
    assert result.generated == 18 and result.generation_failed == 0
    turns = checked = 0
    for row in rows:
        capture = row[CAPTURE_KEY]
        answered = [c for c in capture["calls"] if c["status_code"] == 200]
        carriers = [i for i in row["response"]["output"] if "prompt_token_ids" in i]
        assert len(carriers) == len(answered)  # one item per turn carries the turn's tokens
        for item, call in zip(carriers, answered):
            sent = chat_token_fields(call["response"])  # what the policy sent, from the wire
            assert {k: item[k] for k in sent} == sent
            assert item is [i for i in row["response"]["output"] if i.get("prompt_token_ids") == item["prompt_token_ids"]][-1]
            ids, probs = item["generation_token_ids"], item["generation_log_probs"]
            assert probs == [log_prob(t, k) for k, t in enumerate(ids)][: len(probs)]  # the scripted values, none altered
            turns += 1
        faulty = FAULTY.match(row["responses_create_params"]["input"][0]["content"]) is not None
        codes = [g["code"] for g in capture.get("gaps", [])]
        assert codes == (["token_log_probs_length_mismatch", "token_lineage_break"] if faulty else [])
        checked += 1
    assert checked == 18 and turns == sum(len(script(r["responses_create_params"]["input"][0]["content"])) for r in rows)
    assert result.token_gaps == 2 * 6  # two per faulty rollout, one faulty rollout per task
    # a later turn's request carries the earlier turns' tokens back on their assistant messages
    later = [r.body for r in requests if any(m.get("role") == "tool" for m in r.body["messages"])]
    assert later and all(
        all("prompt_token_ids" in m for m in body["messages"] if m["role"] == "assistant") for body in later
    )
    assert all(body.get("return_token_ids") is True and body.get("logprobs") is True for body in (r.body for r in requests))


async def test_a_policy_that_returns_no_tokens_fails_the_rollout_not_silently(tmp_path: Path) -> None:
    rows = write_rows(tmp_path / "rows.jsonl", tasks=1, repeats=1)
    with ScriptedPolicyServer(script) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")  # a Responses server: no tokens on its items
        async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
            result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target, capture_tokens=True))
    [row] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert result.token_gaps == len(row[CAPTURE_KEY]["calls"]) >= 3
    assert {g["code"] for g in row[CAPTURE_KEY]["gaps"]} == {"token_ids_missing"}


async def test_a_chat_policy_without_token_ids_is_a_gap_per_call_and_the_rollout_is_scored(tmp_path: Path) -> None:
    class NoTokens(ScriptedPolicyServer):
        def _reply(self, item: Any, request: Any) -> Any:
            request.body.pop("return_token_ids", None)  # an endpoint that ignores the ask (not vLLM)
            return super()._reply(item, request)

    rows = write_rows(tmp_path / "rows.jsonl", tasks=1, repeats=1)
    with NoTokens(script) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="chat")
        async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
            result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target, capture_tokens=True))
    [row] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert row["reward"] == 1.0 and not any("prompt_token_ids" in i for i in row["response"]["output"])
    gaps = row[CAPTURE_KEY]["gaps"]
    assert result.token_gaps == len(gaps) == len(row[CAPTURE_KEY]["calls"])
    assert all(g["code"] == "token_ids_missing" and "vLLM >= 0.10.2" in g["detail"] for g in gaps)


async def test_each_row_carries_its_trajectory(tmp_path: Path) -> None:
    started = time.monotonic()
    with ScriptedPolicyServer(script) as policy:
        result, rows = await collect(tmp_path, tasks=3, repeats=2, policy=policy)
    took_ms = (time.monotonic() - started) * 1000
    for row in rows:
        # then its perf block, as NeMo Gym's collection adds it with observability on
        assert list(row)[list(row).index("ng_trajectory") + 1] == "ng_perf"
        perf, turns, calls = row["ng_perf"], row["ng_trajectory"]["turns"], row["ng_trajectory"]["model_calls"]
        assert 0 < perf.pop("total_latency_ms") < took_ms
        assert perf == {"num_turns": len(turns), "num_tool_calls": len(row["ng_trajectory"]["tool_calls"]), "token_observability_coverage": 1.0,
                        "prompt_tokens": sum(c["token_stats"]["prompt_tokens"] for c in calls),
                        "completion_tokens": sum(c["token_stats"]["completion_tokens"] for c in calls)}  # fmt: skip  (a chat policy reports no cached or reasoning counts)
        trajectory = row["ng_trajectory"]
        assert trajectory["schema_version"] == "1.0"
        assert (trajectory["task_id"], trajectory["rollout_id"]) == (str(row["_ng_task_index"]), f"{row['_ng_task_index']}-{row['_ng_rollout_index']}")
        steps = script(row["responses_create_params"]["input"][0]["content"])
        turns, calls, tools = trajectory["turns"], trajectory["model_calls"], trajectory["tool_calls"]
        assert [t["turn_no"] for t in turns] == list(range(1, len(steps) + 1)) and len(calls) == len(steps)
        assert [t["model_calls"][0]["model_call_id"] for t in turns] == [c["model_call_id"] for c in calls]
        assert [c["model_call_id"] for c in calls] == [c["model_call_id"] for c in row[CAPTURE_KEY]["calls"]]
        assert all(c["request"]["messages"] and c["response"]["choices"] for c in calls)  # the payloads live here
        outputs = [i for i in row["response"]["output"] if i["type"] == "function_call_output"]
        assert [(t["tool_call_id"], t["output"], t["status"]) for t in tools] == [(o["call_id"], o["output"], "completed") for o in outputs]
        assert turns[-1]["step_count"] == len(tools) and trajectory["invocations"][0]["status"] == "completed"
        given = [{**m, "type": "message"} for m in row["responses_create_params"]["input"]]  # typed, as NeMo Gym's models read it
        assert trajectory["invocations"][0]["conversation"] == [as_dumped(i) for i in [*given, *row["response"]["output"]]]
        assert turns[0]["question"] == given
        assert [g["code"] for g in trajectory["gaps"]] == ["resolution_unavailable"]  # Counter's verify says no `resolved`
    [entry] = json.loads(result.metrics_path.read_text())  # and their summary, as NeMo Gym's aggregation makes it
    summary, perfs = entry["perf_summary"], [r["ng_perf"] for r in rows]
    assert (summary["overall_observability_coverage"], summary["token_observability_coverage"]) == (1.0, 1.0)
    assert summary["total_completion_tokens"] == sum(p["completion_tokens"] for p in perfs) and summary["max_num_turns"] == max(p["num_turns"] for p in perfs)
    if os.environ.get("GYM_METRICS_NEMO_PYTHON"):  # NeMo Gym's own TrajectoryRecord takes every one
        check = ("import json, sys\nfrom nemo_gym.rollout_observability import TrajectoryRecord\n"
                 "rows = [json.loads(l) for l in sys.stdin]\n"
                 "[TrajectoryRecord.model_validate(r['ng_trajectory']) for r in rows]\nprint(len(rows))\n")  # fmt: skip
        done = subprocess.run([os.environ["GYM_METRICS_NEMO_PYTHON"], "-c", check], input=(tmp_path / "out.jsonl").read_text(),
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.stdout.strip() == str(len(rows)), done.stderr


def test_digests_are_nemo_gyms() -> None:
    from gym_metrics.recording import encode_token_ids, token_digest

    # NeMo Gym 0.7.0's compute_digest of these lists (nemo_gym/token_id_capture/records.py, run in its venv)
    assert token_digest([]) == "2e222d36d0c6ae1db1ec18b3f96d9a46df5db61b40137bbfbac4cdf0acde9763"
    assert token_digest([1, 2, 3, 10, 11]) == "b2fa3bb7a342b4c9e2ee30873eab60c4fee66cf320bff7e8c536cd17a00cf381"
    assert encode_token_ids([258]) == b"\x01" + (1).to_bytes(8, "big") + (258).to_bytes(8, "big")
    with pytest.raises(ValueError):
        encode_token_ids([-1])


async def test_token_entries_and_the_training_sequence(tmp_path: Path) -> None:
    from gym_metrics.recording import TokenLineageError, linearize, token_digest, token_entries

    with ScriptedPolicyServer(faulty_script) as policy:
        _, rows = await collect(tmp_path, tasks=2, repeats=2, policy=policy)
    for row in rows:
        entries = token_entries(row)
        turns = [i for i in row["response"]["output"] if "generation_token_ids" in i]
        assert len(entries) == len(turns) and entries[0]["parent_resolution"] == "root"
        for entry, item in zip(entries, turns):
            cumulative = [*item["prompt_token_ids"], *item["generation_token_ids"]]
            assert (entry["digest"], entry["cum_len"]) == (token_digest(cumulative), len(cumulative))
            assert not any("prompt_token_ids" in i for i in entry["output_items"])
            assert entry["output_items"][entry["token_item_index"]]["id"] == item["id"]
        faulty = FAULTY.match(row["responses_create_params"]["input"][0]["content"]) is not None
        resolutions = [e["parent_resolution"] for e in entries]
        if not faulty:
            assert resolutions == ["root", *["resolved"] * (len(entries) - 1)]
            assert [e["parent_call_id"] for e in entries[1:]] == [e["model_call_id"] for e in entries[:-1]]
            sequence = linearize(row)
            last = turns[-1]
            assert sequence.token_ids == [*last["prompt_token_ids"], *last["generation_token_ids"]]
            generated = [t for item in turns for t in item["generation_token_ids"]]
            assert [t for t, m in zip(sequence.token_ids, sequence.loss_mask) if m] == generated
            assert [p for p, m in zip(sequence.log_probs, sequence.loss_mask) if m] == [p for i in turns for p in i["generation_log_probs"]]
            assert all(p == 0.0 for p, m in zip(sequence.log_probs, sequence.loss_mask) if not m)
        else:
            assert resolutions[2] == "unresolved"  # where the template changed
            with pytest.raises(TokenLineageError, match="turn 1: .* generated token ids, .* log-probs"):
                linearize(row)  # the short log-probs come first
    if os.environ.get("GYM_METRICS_NEMO_PYTHON"):  # NeMo Gym's own TokenEntry and digest agree
        check = ("import json, sys\nfrom nemo_gym.token_id_capture.records import TokenEntry, compute_digest\n"
                 "n = 0\nfor e in json.load(sys.stdin):\n"
                 "    if len(e['generation_token_ids']) != len(e['generation_log_probs']): continue\n"
                 "    TokenEntry.model_validate(e)\n"
                 "    assert compute_digest(e['prompt_token_ids'] + e['generation_token_ids']) == e['digest']\n    n += 1\nprint(n)\n")  # fmt: skip
        entries = [e for row in rows for e in token_entries(row)]
        done = subprocess.run([os.environ["GYM_METRICS_NEMO_PYTHON"], "-c", check], input=json.dumps(entries), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and int(done.stdout) >= len(entries) - 2, done.stderr


def bpe_tokenizer(path: Path) -> Any:
    """A byte-level BPE tokenizer with the template's special tokens, trained here, saved to
    `path` and loaded back from it (as a model's tokenizer.json is)."""
    tokenizers = _ci.need_module("tokenizers", "pip install tokenizers (in the dev extra)")
    special = ["<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>", "<|call|>"]
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=400, special_tokens=special, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()
    )
    corpus = [f"Task {t}, rollout {r}: add {t} then {r + 1} increment_counter get_counter_value count Done." for t in range(10) for r in range(4)]
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.save(str(path))
    return tokenizers.Tokenizer.from_file(str(path))


async def test_a_real_tokenizers_ids_are_kept_exact_and_their_lineage_holds(tmp_path: Path) -> None:
    tokenizer = bpe_tokenizer(tmp_path / "tokenizer.json")

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text).ids)

    with ScriptedPolicyServer(script, tokenizer=encode) as policy:
        result, rows = await collect(tmp_path, tasks=3, repeats=2, policy=policy)
    assert result.token_gaps == 0 and result.generation_failed == 0
    from gym_metrics.recording import linearize

    for row in rows:
        turns = [i for i in row["response"]["output"] if "generation_token_ids" in i]
        for item in turns:
            text = tokenizer.decode(item["generation_token_ids"], skip_special_tokens=False)
            assert text.endswith("<|end|>") and len(item["generation_token_ids"]) < len(text.encode())  # merged, not bytes
        sequence = linearize(row)
        assert tokenizer.decode(sequence.token_ids, skip_special_tokens=False).startswith("<|user|>Task ")
        assert sum(sequence.loss_mask) == sum(len(i["generation_token_ids"]) for i in turns)


def test_token_ids_two_sources_give_differently_are_a_gap_and_not_written() -> None:
    """vLLM gives a turn's generated IDs twice (`choice.token_ids`, and the log-probs' `token_id:N`
    tokens); NeMo Gym's server raises when they differ. They were paired silently."""
    def completion(ids: list[int], logged: list[int], message: dict[str, Any] | None = None) -> dict[str, Any]:
        content = [{"token": f"token_id:{t}", "logprob": -0.1 * k} for k, t in enumerate(logged)]
        return {"prompt_token_ids": [1, 2], "choices": [{"message": message or {"role": "assistant", "content": "x"}, "token_ids": ids, "logprobs": {"content": content}}]}

    assert chat_token_fields(completion([5, 6], [5, 6])) == {"prompt_token_ids": [1, 2], "generation_token_ids": [5, 6], "generation_log_probs": [0.0, -0.1]}
    with pytest.raises(TokenInfoError, match="choice.token_ids disagree") as disagree:
        chat_token_fields(completion([5, 6], [5, 7]))
    assert disagree.value.code == "token_ids_disagree"
    short = chat_token_fields(completion([5, 6], [5]))  # agreeing as far as both go: the length gap's
    assert (short["generation_token_ids"], short["generation_log_probs"]) == ([5, 6], [0.0])
    own = {"role": "assistant", "content": "x", "prompt_token_ids": [1, 2], "generation_token_ids": [9], "generation_log_probs": [-1.0]}
    with pytest.raises(TokenInfoError, match="the message's token IDs disagree"):
        chat_token_fields(completion([5], [5], own))
    with pytest.raises(TokenInfoError, match="without generation_log_probs"):
        chat_token_fields(completion([5], [5], {k: v for k, v in own.items() if k != "generation_log_probs"}))
    calls = [Exchange("chat", {}, 0.0, response=completion([5, 6], [5, 7]))]
    assert [g["code"] for g in token_gaps(calls)] == ["token_ids_disagree"]


def _completion(**changes: Any) -> dict[str, Any]:
    """A well-formed vLLM chat answer with token IDs, then `changes` applied (dotted paths)."""
    answer: dict[str, Any] = {"prompt_token_ids": [1, 2], "choices": [{"message": {"role": "assistant", "content": "x"}, "token_ids": [5, 6],
                              "logprobs": {"content": [{"token": "token_id:5", "logprob": -0.5}, {"token": "token_id:6", "logprob": -1}]}}]}  # fmt: skip
    for path, value in changes.items():
        *parents, last = path.split(".")
        node: Any = answer
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[last] = value
    return answer


@pytest.mark.parametrize(
    ("dialect", "answer", "code", "detail"),
    [
        ("chat", {"choices": ["oops"]}, "token_ids_missing", "no choice"),
        ("chat", _completion(**{"choices.0.logprobs": "x"}), "token_ids_malformed", r"choices\[0\]\.logprobs is str"),
        ("chat", _completion(**{"choices.0.token_ids": [5.7, 6.2]}), "token_ids_malformed", r"choice.token_ids\[0\] is 5.7"),
        ("chat", _completion(**{"choices.0.token_ids": [True, 6]}), "token_ids_malformed", "is True, not an integer"),
        ("chat", _completion(**{"choices.0.token_ids": "56"}), "token_ids_malformed", "is str, not a list"),
        ("chat", _completion(prompt_token_ids=None), "token_ids_missing", "choice.token_ids without prompt_token_ids"),
        ("chat", _completion(**{"choices.0.logprobs.content.1.logprob": "-1"}), "token_ids_malformed", r"logprob\[1\] is '-1'"),
        ("chat", _completion(**{"choices.0.logprobs.content.0.token": "Hello"}), "token_ids_malformed", "'Hello', not token_id:N"),
        ("responses", {"output": [{"type": "message", "prompt_token_ids": [1]}]}, "token_ids_missing", "without generation_token_ids"),
        ("responses", {"output": [{"type": "message", "prompt_token_ids": [1], "generation_token_ids": None,
                                   "generation_log_probs": []}]}, "token_ids_malformed", "generation_token_ids is NoneType"),  # fmt: skip
        ("responses", {"output": {"type": "message"}}, "token_ids_missing", "carries no prompt_token_ids"),
        ("responses", ["not", "an", "object"], "token_ids_missing", "is list, not an object"),
    ],
)
def test_a_malformed_answers_tokens_are_a_gap_named_never_an_error(dialect: str, answer: Any, code: str, detail: str) -> None:
    """One such answer ended the whole collect run (exit 1, no rows); float IDs were truncated."""
    later = Exchange("chat", {}, 0.0, response=_completion())
    gaps = token_gaps([Exchange(dialect, {}, 0.0, response=answer), later])
    assert [g["code"] for g in gaps] == [code] and re.search(detail, gaps[0]["detail"]), gaps
    assert token_gaps([later]) == [] and chat_token_fields(_completion())["generation_log_probs"] == [-0.5, -1.0]


async def test_an_answer_that_spells_the_key_keeps_no_token_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy that echoes its API key: the text is masked, and the token IDs and log-probs that
    spell the same text are dropped (a gap says so), not written beside the masked text."""
    key = "sk-SECRET-token-abcdef123456"
    monkeypatch.setenv("GM_TOKEN_TEST_KEY", key)
    rows = write_rows(tmp_path / "rows.jsonl", tasks=2, repeats=1)
    with ScriptedPolicyServer(lambda prompt: [PolicyAnswer(f"your key is {key}" if "Task 0," in prompt else "no key here")]) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="chat", api_key_env="GM_TOKEN_TEST_KEY")
        async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
            result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target, capture_tokens=True, capture_payloads=True))
    text = (tmp_path / "out.jsonl").read_text()
    assert result.generated == 2 and key not in text
    spelled = ",".join(map(str, key.encode()))
    assert spelled not in text.replace(" ", "")  # the bytes-as-IDs of the key appear nowhere
    by_task = {r["_ng_task_index"]: r for r in map(json.loads, text.splitlines())}
    echoed, plain = by_task[0], by_task[1]
    assert [g["code"] for g in echoed[CAPTURE_KEY]["gaps"]] == ["token_ids_masked"]
    assert not any("generation_token_ids" in i for i in echoed["response"]["output"])
    assert not any("logprobs" in c["response"]["choices"][0] for c in echoed[CAPTURE_KEY]["calls"])
    assert plain[CAPTURE_KEY].get("gaps", []) == [] and any(i.get("generation_token_ids") for i in plain["response"]["output"])
