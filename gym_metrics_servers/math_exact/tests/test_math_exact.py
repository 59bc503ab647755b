"""math_exact: extraction, normalisation, verify, pass@k metrics and the shipped sample."""

from __future__ import annotations

import asyncio
import json
from fractions import Fraction
from typing import Any

import orjson
import pytest

import gym_metrics
from gym_metrics import InvalidInputError
from gym_metrics.aggregate import aggregate_file
from gym_metrics_servers.math_exact import make_sample
from gym_metrics_servers.math_exact.app import (
    AVG_OF_K,
    SAMPLE_PATH,
    MathExactServer,
    MathVerifyRequest,
    MathVerifyResponse,
    answers_match,
    extract_answer,
    normalize,
    response_text,
    to_number,
)

AGENTS = ("strong_agent", "medium_agent", "weak_agent")


def _response(*texts: str, reasoning: str | None = None) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reasoning is not None:
        output.append({"type": "reasoning", "summary": [{"type": "summary_text", "text": reasoning}]})
    for text in texts:
        output.append(
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        )
    return {"output": output, "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}


def _sample_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE_PATH.read_text(encoding="utf-8").splitlines()]


# ----------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("So the result is \\boxed{42}.", "42"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),  # nested braces
        ("\\boxed{{a}+{b}^{2}}", "{a}+{b}^{2}"),
        ("first \\boxed{1} then \\boxed{2}", "2"),  # the last box wins
        ("\\boxed{7} and a truncated \\boxed{8", "7"),  # an unclosed box is ignored
        ("\\fbox{9}", "9"),
        ("$\\boxed{ 3 }$", "3"),
        ("\\boxed{5} The answer is 6.", "5"),  # a box beats "answer is"
        ("I think the answer is 12.", "12"),
        ("The answer is 0.5.", "0.5"),  # the decimal point is not the sentence end
        ("The answer is 3. Wait, the answer is 4.", "4"),
        ("Answer: 17", "17"),
        ("**Answer:** 1,234", "1,234"),
        ("The final answer is $\\frac{3}{4}$.\nDone", "$\\frac{3}{4}$"),
        ("I answered: nothing here, 5 apples", "5"),  # "answered:" is not "answer:"
        ("We compute 2 + 3 = 5", "5"),
        ("That leaves 5-3 = 2", "2"),
        ("x = -3", "-3"),
        ("roughly 1,000,000 grains", "1,000,000"),
        ("half is 1/2", "1/2"),
        ("about .25 of it", ".25"),
    ],
)
def test_extract_answer(text: str, expected: str) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text", [None, "", "I do not know.", "no digits at all", "\\boxed{unclosed"])
def test_extract_answer_none(text: str | None) -> None:
    assert extract_answer(text) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  42  ", "42"),
        ("$42$", "42"),
        ("42.", "42"),
        ("\\text{Paris}", "Paris"),
        ("$\\text{ Paris }$.", "Paris"),
        ("\\textbf{yes}", "yes"),
        ("\\boxed{7}", "7"),
        ("\\text{a} \\text{b}", "\\text{a} \\text{b}"),  # not one surrounding wrapper
        ("1\\,000", "1000"),
        ("1{,}000", "1,000"),
        ("50\\%", "50"),
        ("90^\\circ", "90"),
        ("x = 6", "6"),
        ("\\(  2  \\)", "2"),
        ("New   York", "New York"),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", Fraction(2)),
        ("2.0", Fraction(2)),
        ("-0.5", Fraction(-1, 2)),
        (".25", Fraction(1, 4)),
        ("+3", Fraction(3)),
        ("1,234", Fraction(1234)),
        ("1,234,567.5", Fraction(2469135, 2)),
        ("1 000", Fraction(1000)),
        ("1/2", Fraction(1, 2)),
        ("-3 / 4", Fraction(-3, 4)),
        ("\\frac{1}{2}", Fraction(1, 2)),
        ("\\dfrac{6}{8}", Fraction(3, 4)),
        ("-\\frac{1}{3}", Fraction(-1, 3)),
        ("\\frac{1.5}{3}", Fraction(1, 2)),
        ("1,2", None),  # not a thousands grouping
        ("1,2345", None),
        ("1/0", None),
        ("2^{10}", None),
        ("Paris", None),
        ("nan", None),
        ("inf", None),
        ("1e3", None),
    ],
)
def test_to_number(text: str, value: Fraction | None) -> None:
    assert to_number(text) == value


@pytest.mark.parametrize(
    ("extracted", "expected", "match"),
    [
        ("1/2", "0.5", True),
        ("\\frac{1}{2}", "1/2", True),
        ("0.50", "\\frac{2}{4}", True),
        ("2", "2.0", True),
        ("2.0001", "2", False),
        ("1,000", "1000", True),
        ("1\\,000", "1,000", True),
        ("-5", "-5", True),
        ("5", "-5", False),
        ("0.333", "1/3", False),  # exact, no tolerance
        ("\\text{Paris}", "paris", True),
        ("PARIS", "Paris", True),
        ("Lyon", "Paris", False),
        ("x = 6", "6", True),
        ("42 apples", "42", False),
        ("2^{10}", "1024", False),
        (None, "42", False),
        ("", "", False),  # an empty reference matches nothing
    ],
)
def test_answers_match(extracted: str | None, expected: str, match: bool) -> None:
    assert answers_match(extracted, expected) is match


def test_response_text_reads_message_output_text_only() -> None:
    response = _response("first", "second", reasoning="\\boxed{99}")
    response["output"].append({"type": "function_call", "name": "calc", "arguments": "{}"})
    assert response_text(response) == "first\nsecond"
    assert response_text({}) == ""
    assert response_text({"output": "not a list"}) == ""
    assert response_text({"output": [{"type": "message", "content": "plain string"}]}) == "plain string"


# ----------------------------------------------------------------------------- verify


async def test_verify_correct_and_incorrect() -> None:
    server = MathExactServer()
    body = server.parse_verify_request({"response": _response("so \\boxed{\\frac{1}{2}}"), "expected_answer": "0.5"})
    assert isinstance(body, MathVerifyRequest)
    result = await server.verify(body)
    assert isinstance(result, MathVerifyResponse)
    assert (result.reward, result.is_correct, result.extracted_answer) == (1.0, True, "\\frac{1}{2}")
    assert result.expected_answer == "0.5"

    wrong = await server.verify(server.parse_verify_request({"response": _response("Answer: 3"), "expected_answer": "4"}))
    assert (wrong.reward, wrong.is_correct, wrong.extracted_answer) == (0.0, False, "3")


async def test_verify_uses_last_message_answer_and_ignores_reasoning() -> None:
    server = MathExactServer()
    body = {"response": _response("draft: \\boxed{1}", "final: \\boxed{2}", reasoning="\\boxed{3}"), "expected_answer": "2"}
    assert (await server.verify_dict(body))["reward"] == 1.0


async def test_verify_model_output_fallback_and_no_text() -> None:
    server = MathExactServer()
    plain = await server.verify_dict({"model_output": "The answer is 7.", "expected_answer": "7"})
    assert plain["reward"] == 1.0 and plain["extracted_answer"] == "7"
    # The response wins when it holds text.
    both = await server.verify_dict({"response": _response("\\boxed{8}"), "model_output": "7", "expected_answer": "7"})
    assert both["reward"] == 0.0 and both["extracted_answer"] == "8"
    # A row with neither a response nor model_output is a task nobody answered: an invalid
    # request naming what to give, never a silent 0 (as NeMo Gym, whose response is required).
    with pytest.raises(InvalidInputError, match="no answer to verify: give `response`.*--policy-url"):
        await server.verify_dict({"expected_answer": "7"})
    # An answer without text (the model said nothing): not found, reward 0, not an error.
    for body in ({"response": {"output": []}, "expected_answer": "7"}, {"response": {"output": []}, "model_output": "", "expected_answer": "7"}):
        empty = await server.verify_dict(body)
        assert empty == {
            "reward": 0.0,
            "mask_sample": False,
            "extracted_answer": None,
            "is_correct": False,
            "expected_answer": "7",
        }


async def test_verify_accepts_numeric_expected_answer() -> None:
    server = MathExactServer()
    body = server.parse_verify_request({"model_output": "\\boxed{42}", "expected_answer": 42})
    assert body.expected_answer == "42"
    assert (await server.verify(body)).reward == 1.0


def test_missing_expected_answer_names_the_field() -> None:
    with pytest.raises(InvalidInputError) as info:
        MathExactServer().parse_verify_request({"response": _response("\\boxed{1}")}, row=3)
    fields = [v.field for v in info.value.violations]
    assert "body_json.expected_answer" in fields
    assert all(v.row == 3 for v in info.value.violations)
    assert "body_json.expected_answer" in str(info.value)


def test_wrong_type_expected_answer_is_invalid() -> None:
    with pytest.raises(InvalidInputError) as info:
        MathExactServer().parse_verify_request({"expected_answer": ["42"], "model_output": "42"})
    assert [v.field for v in info.value.violations] == ["body_json.expected_answer"]


def test_server_info_and_models() -> None:
    server = MathExactServer()
    assert MathExactServer.server_name() == "math_exact"
    assert MathExactServer.verify_request_model() is MathVerifyRequest
    assert MathExactServer.verify_response_model() is MathVerifyResponse
    assert not server.wants_rows  # the columnar hook: no rows needed (issue 12)
    info = server.server_info()
    assert info["name"] == "math_exact"
    assert "expected_answer" in info["verify_request_schema"]["required"]
    assert {"extracted_answer", "is_correct", "expected_answer", "reward"} <= set(info["verify_response_schema"]["properties"])


def test_resolve_server_by_name() -> None:
    assert gym_metrics.resolve_server("math_exact") is MathExactServer
    assert "math_exact" in gym_metrics.environments.registered_servers()


# ----------------------------------------------------------------------------- metrics


def _tasks(rewards: list[list[Any]], first_task: int = 0) -> list[list[dict[str, Any]]]:
    return [
        [{"_ng_task_index": first_task + t, "_ng_rollout_index": r, "reward": x} for r, x in enumerate(task)]
        for t, task in enumerate(rewards)
    ]


def test_compute_metrics_first_k_pass_at_k() -> None:
    rewards = [
        [1, 0, 1, 0],
        [0, 0, 0, 0],
        [1, 1, 1, 1],
        [0, 1],  # fewer samples than k = 4: counted with the two it has
        [0, 0, 0, 1, 0, 0],  # six samples: k = 1, 2, 4 and 6
    ]
    out = MathExactServer().compute_metrics(_tasks(rewards, first_task=10))
    per_task = out.pop("per_task_metrics")
    assert out == {
        "pass@1": pytest.approx(2 / 5),
        "pass@2": pytest.approx(3 / 5),
        "pass@4": pytest.approx(4 / 5),
        "pass@6": pytest.approx(4 / 5),
        AVG_OF_K: pytest.approx((0.5 + 0 + 1 + 0.5 + 1 / 6) / 5),
    }
    assert list(out) == ["pass@1", "pass@2", "pass@4", "pass@6", AVG_OF_K]
    assert [e["_ng_task_index"] for e in per_task] == [10, 11, 12, 13, 14]
    assert per_task[0] == {"_ng_task_index": 10, "pass@1": 1.0, "pass@2": 1.0, "pass@4": 1.0, "pass@6": 1.0, AVG_OF_K: 0.5}
    assert per_task[3] == {"_ng_task_index": 13, "pass@1": 0.0, "pass@2": 1.0, "pass@4": 1.0, "pass@6": 1.0, AVG_OF_K: 0.5}
    assert per_task[4]["pass@2"] == 0.0 and per_task[4]["pass@4"] == 1.0
    assert per_task[4][AVG_OF_K] == pytest.approx(1 / 6)
    assert all(type(v) is float for e in per_task for k, v in e.items() if k != "_ng_task_index")


def test_compute_metrics_spec_vector_v1() -> None:
    out = MathExactServer().compute_metrics(_tasks([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]]))
    assert out["pass@2"] == pytest.approx(2 / 3)
    assert out["pass@1"] == pytest.approx(2 / 3)
    assert out["pass@4"] == pytest.approx(2 / 3)
    assert out[AVG_OF_K] == pytest.approx(1 / 2)
    assert "pass@3" not in out


def test_compute_metrics_order_partial_and_missing_rewards() -> None:
    # Order matters: the same rewards, passing sample first or last.
    assert MathExactServer().compute_metrics(_tasks([[1, 0, 0]]))["pass@1"] == 1.0
    late = MathExactServer().compute_metrics(_tasks([[0, 0, 1]]))
    assert (late["pass@1"], late["pass@2"], late["pass@3"]) == (0.0, 0.0, 1.0)
    # A partial reward never passes; a missing reward neither passes nor enters the mean.
    out = MathExactServer().compute_metrics(_tasks([[0.5, 0.99], [None, 1.0], [None]]))
    assert out["pass@2"] == pytest.approx(1 / 3)
    assert out["pass@1"] == 0.0  # a missing reward still takes its position among the first k
    assert out[AVG_OF_K] == pytest.approx((0.745 + 1.0) / 2)
    assert AVG_OF_K not in out["per_task_metrics"][2]
    # Booleans count as 0/1; the task index may come as task_index.
    rows = [[{"task_index": 4, "rollout_index": 0, "reward": True}]]
    out = MathExactServer().compute_metrics(rows)
    assert out["pass@1"] == 1.0 and out["per_task_metrics"] == [{"_ng_task_index": 4, "pass@1": 1.0, AVG_OF_K: 1.0}]


def test_compute_metrics_empty() -> None:
    assert MathExactServer().compute_metrics([]) == {}


@pytest.mark.parametrize(
    ("n", "ks"),
    [(1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (4, [1, 2, 4]), (6, [1, 2, 4, 6]), (16, [1, 2, 4, 8, 16])],
)
def test_pass_at_k_values(n: int, ks: list[int]) -> None:
    out = MathExactServer().compute_metrics(_tasks([[0] * n]))
    assert [k for k in out if k.startswith("pass@") and k != AVG_OF_K] == [f"pass@{k}" for k in ks]


def test_get_key_metrics() -> None:
    agent_metrics = {
        "mean/reward": 0.5,
        "std/reward": 0.1,
        "mean/output_tokens": 100.0,
        "pass@1": 0.4,
        "pass@2": 0.6,
        "pass@16": 0.9,
        "pass@4": 0.8,
        AVG_OF_K: 0.43,
        "num_repeats": 16,
    }
    assert MathExactServer().get_key_metrics(agent_metrics) == {"mean/reward": 0.5, AVG_OF_K: 0.43, "pass@16": 0.9}
    assert MathExactServer().get_key_metrics({"mean/reward": 1.0}) == {"mean/reward": 1.0}
    assert MathExactServer().get_key_metrics({}) == {}


# ----------------------------------------------------------------------------- the sample


def test_sample_is_reproducible() -> None:
    assert make_sample.render(make_sample.build_rows()) == SAMPLE_PATH.read_text(encoding="utf-8")


def test_sample_shape() -> None:
    lines = _sample_lines()
    assert len(lines) == 144
    keys = {(row["agent_ref"]["name"], row["_ng_task_index"], row["_ng_rollout_index"]) for row in lines}
    assert keys == {(a, t, r) for a in AGENTS for t in range(12) for r in range(4)}
    for row in lines:
        assert "reward" not in row
        usage = row["response"]["usage"]
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert row["responses_create_params"]["input"][0]["role"] == "user"


async def _verified_sample() -> dict[str, list[dict[str, Any]]]:
    server = MathExactServer()
    lines = _sample_lines()
    results = await asyncio.gather(*(server.verify_dict(line, row=i) for i, line in enumerate(lines)))
    by_agent: dict[str, list[dict[str, Any]]] = {a: [] for a in AGENTS}
    for line, result in zip(lines, results):
        by_agent[line["agent_ref"]["name"]].append({**line, **result})
    return by_agent


async def test_sample_verifies_with_agent_ordering() -> None:
    by_agent = await _verified_sample()
    accuracy = {}
    for agent, rows in by_agent.items():
        rewards = [row["reward"] for row in rows]
        assert set(rewards) <= {0.0, 1.0}
        assert all(row["is_correct"] is (row["reward"] == 1.0) for row in rows)
        accuracy[agent] = sum(rewards) / len(rewards)
    assert accuracy["strong_agent"] > accuracy["medium_agent"] > accuracy["weak_agent"]
    assert accuracy["weak_agent"] > 0 and accuracy["strong_agent"] < 1  # both outcomes occur


async def test_sample_aggregates_with_pass_at_k() -> None:
    by_agent = await _verified_sample()
    server = MathExactServer()
    previous_reward = 2.0
    for agent in AGENTS:
        agg = await server.aggregate_metrics(by_agent[agent], agent_name=agent)
        m = agg.agent_metrics
        rewards = [row["reward"] for row in by_agent[agent]]
        assert m["mean/reward"] == pytest.approx(sum(rewards) / len(rewards))
        assert m["mean/reward"] < previous_reward
        previous_reward = m["mean/reward"]
        assert m["num_repeats"] == 4
        for key in ("pass@1", "pass@2", "pass@4", AVG_OF_K, "mean/is_correct", "mean/output_tokens"):
            assert key in m, key
        assert "pass@8" not in m
        assert m["pass@1"] <= m["pass@2"] <= m["pass@4"]
        # Every task has 4 rollouts, so the macro mean equals the micro mean.
        assert m[AVG_OF_K] == pytest.approx(m["mean/reward"])
        assert agg.key_metrics == {"mean/reward": m["mean/reward"], AVG_OF_K: m[AVG_OF_K], "pass@4": m["pass@4"]}

        groups = agg.groups
        assert groups.task_index.tolist() == list(range(12))
        assert groups.custom is not None and len(groups.custom) == 12
        for i, custom in enumerate(groups.custom):
            assert custom is not None
            assert set(custom) == {"pass@1", "pass@2", "pass@4", AVG_OF_K}
            assert custom[AVG_OF_K] == pytest.approx(groups.stats["mean/reward"][i])
            task_rewards = [r["reward"] for r in by_agent[agent] if r["_ng_task_index"] == i]
            assert custom["pass@4"] == float(max(task_rewards) >= 1.0)
            assert custom["pass@1"] == float(task_rewards[0] >= 1.0)
        assert sum(c["pass@4"] for c in groups.custom) / 12 == pytest.approx(m["pass@4"])


async def test_sample_aggregates_offline_from_file(tmp_path) -> None:
    by_agent = await _verified_sample()
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for agent in AGENTS for row in by_agent[agent]))
    server = MathExactServer()
    out, results, _ = aggregate_file(path, compute_metrics=server.compute_metrics, get_key_metrics=server.get_key_metrics)
    assert out == tmp_path / "rollouts_aggregate_metrics.json"
    written = orjson.loads(out.read_bytes())
    assert [entry["agent_ref"]["name"] for entry in written] == sorted(AGENTS)
    for entry in written:
        assert set(entry["key_metrics"]) == {"mean/reward", AVG_OF_K, "pass@4"}
        assert entry["agent_metrics"]["num_repeats"] == 4
        group = entry["group_level_metrics"][0]
        assert {"pass@1", "pass@2", "pass@4", AVG_OF_K} <= set(group)


def test_per_task_entries_span_many_slices() -> None:
    """Entries are made a slice of tasks at a time (the server's loop keeps turning); every task
    past the first slice still gets its own values, in task order."""
    import numpy as np

    from gym_metrics.aggregate import MetricColumns

    n = 70_001  # past one 65,536-task slice
    task_index = np.arange(n, dtype=np.int64) * 3
    rewards = (np.arange(n) % 3 == 0).astype(float)
    rewards[5] = np.nan  # no mean for task 5
    columns = MetricColumns(task_index, np.ones(n, dtype=np.int64), task_index, np.zeros(n, dtype=np.int64), {"reward": rewards})
    entries = MathExactServer().compute_metrics_columns(columns)["per_task_metrics"]
    assert [e["_ng_task_index"] for e in entries] == task_index.tolist()
    assert [e["pass@1"] for e in entries] == np.nan_to_num(rewards).tolist()
    assert "pass@1[avg-of-k]" not in entries[5] and entries[69_999]["pass@1[avg-of-k]"] == 1.0
