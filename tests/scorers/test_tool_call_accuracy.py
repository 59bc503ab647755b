"""tool_call_accuracy (docs/metrics.md#tool-call-accuracy): RAGAS 0.4.3's numbers on the
reference rows and on edge cases."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.scorers.tool_calls import predicted_calls, tool_call_accuracy
from gym_metrics.evaluation import evaluate
from gym_metrics.scorers import RowError

DATA = Path(__file__).parents[1] / "data" / "tool_call_accuracy"
CASES = [json.loads(line) for line in (DATA / "cases.jsonl").read_text().splitlines()]
EXPECTED = {e["id"]: e for e in (json.loads(line) for line in (DATA / "expected.jsonl").read_text().splitlines())}


def human(text: str = "hi") -> dict[str, Any]:
    return {"content": text, "type": "human"}


def ai(*calls: tuple[str, dict[str, Any]], content: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"content": content, "type": "ai"}
    if calls:
        message["tool_calls"] = [{"name": n, "args": a} for n, a in calls]
    return message


def tool(text: str = "ok") -> dict[str, Any]:
    return {"content": text, "type": "tool"}


def ref(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": n, "args": a} for n, a in calls]


def both(user_input: list[dict[str, Any]], reference: list[dict[str, Any]]) -> tuple[float, float]:
    """(strict, unordered) scores."""
    return tool_call_accuracy(user_input, reference), tool_call_accuracy(user_input, reference, strict_order=False)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reference_rows(case: dict[str, Any]) -> None:
    expected = EXPECTED[case["id"]]
    strict, unordered = both(case["user_input"], case["reference_tool_calls"])
    assert strict == expected["tool_call_accuracy"]
    assert unordered == expected["tool_call_accuracy_unordered"]


def test_reference_rows_through_evaluate() -> None:
    strict = evaluate("tool_call_accuracy", CASES).column("tool_call_accuracy").tolist()
    unordered = evaluate("tool_call_accuracy", CASES, config={"strict_order": False}).column("tool_call_accuracy")
    assert strict == [EXPECTED[c["id"]]["tool_call_accuracy"] for c in CASES]
    assert unordered.tolist() == [EXPECTED[c["id"]]["tool_call_accuracy_unordered"] for c in CASES]


W, S, B = ("get_weather", {"city": "Paris"}), ("search", {"q": "nvidia"}), ("book", {"city": "Paris", "day": "tue"})


@pytest.mark.parametrize(
    ("user_input", "reference", "strict", "unordered"),
    [
        # reordered: strict needs the reference order, unordered does not
        ([human(), ai(S, W), tool(), tool()], ref(W, S), 0.0, 1.0),
        ([human(), ai(B, S, W)], ref(W, S, B), 0.0, 1.0),
        # extra / missing calls: any difference in count is 0, even when the rest matches
        ([human(), ai(W, S, B)], ref(W, S), 0.0, 0.0),
        ([human(), ai(W)], ref(W, S), 0.0, 0.0),
        ([human(), ai(W, W)], ref(W), 0.0, 0.0),
        ([human(), ai(W)], ref(W, W), 0.0, 0.0),
        # duplicates on both sides
        ([human(), ai(W, W)], ref(W, W), 1.0, 1.0),
        ([human(), ai(W, S, W)], ref(W, W, S), 0.0, 1.0),
        # same name, different args: order decides the pairs in strict mode, the sort in unordered
        ([human(), ai(("f", {"x": 2}), ("f", {"x": 1}))], ref(("f", {"x": 1}), ("f", {"x": 2})), 0.0, 1.0),
        ([human(), ai(("f", {"x": 1}), ("f", {"x": 3}))], ref(("f", {"x": 2}), ("f", {"x": 1})), 0.0, 0.5),
        # per-pair argument fraction, then the mean over pairs
        ([human(), ai(("f", {"a": 1, "b": 2, "c": 3}))], ref(("f", {"a": 1, "b": 0, "c": 0})), 1 / 3, 1 / 3),
        (
            [human(), ai(("f", {"a": 1}), ("g", {"a": 1, "b": 0}))],
            ref(("f", {"a": 1}), ("g", {"a": 1, "b": 2})),
            0.75,
            0.75,
        ),
        # a missing argument counts 0; extra predicted arguments are ignored
        ([human(), ai(("f", {"a": 1}))], ref(("f", {"a": 1, "b": 2})), 0.5, 0.5),
        ([human(), ai(("f", {"a": 1, "zzz": 9}))], ref(("f", {"a": 1})), 1.0, 1.0),
        # empty reference args: 1.0 only when the prediction has none either
        ([human(), ai(("f", {}))], ref(("f", {})), 1.0, 1.0),
        ([human(), ai(("f", {"a": 1}))], ref(("f", {})), 0.0, 0.0),
        ([human(), ai(("f", {}))], ref(("f", {"a": 1})), 0.0, 0.0),
        # empty references and predictions
        ([human(), ai(content="hello")], [], 1.0, 1.0),
        ([human(), ai(W)], [], 0.0, 0.0),
        ([human(), ai(content="no calls")], ref(W), 0.0, 0.0),
        ([human()], ref(W), 0.0, 0.0),
        ([], [], 1.0, 1.0),
        # multiple AI turns: calls are gathered from every ai message, in order
        ([human(), ai(W), tool(), human("more"), ai(S), tool(), ai(content="done")], ref(W, S), 1.0, 1.0),
        ([human(), ai(S), tool(), ai(W), tool()], ref(W, S), 0.0, 1.0),
    ],
)
def test_calls(user_input: list[Any], reference: list[Any], strict: float, unordered: float) -> None:
    assert both(user_input, reference) == (pytest.approx(strict, abs=0), pytest.approx(unordered, abs=0))


@pytest.mark.parametrize(
    ("pred", "expected", "score"),
    [
        (5, "5", 1.0),  # str(5) == "5"
        (5, 5.0, 0.0),  # "5" != "5.0"
        (True, "True", 1.0),
        (True, 1, 0.0),  # "True" != "1" (Python == would say equal)
        (None, "None", 1.0),
        ("paris", "Paris", 0.0),  # case-sensitive
        ([1, 2], "[1, 2]", 1.0),
        ([1, 2], [2, 1], 0.0),
        ({"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2]}, 1.0),  # nested, identical
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, 0.0),  # dict key order matters (str differs)
        ({"a": {"x": 1}}, {"a": {"x": "1"}}, 0.0),  # nested types: "{'x': 1}" != "{'x': '1'}"
        (1e100, "1e+100", 1.0),
        (0.1, 0.1, 1.0),
    ],
)
def test_argument_values_compare_as_python_str(pred: Any, expected: Any, score: float) -> None:
    row = [human(), ai(("f", {"v": pred}))]
    assert both(row, ref(("f", {"v": expected}))) == (score, score)


def test_human_and_tool_messages_tool_calls_are_ignored() -> None:
    row = [
        {"content": "hi", "type": "human", "tool_calls": "not even a list"},
        ai(W),
        {"content": "", "type": "tool", "tool_calls": [1]},
    ]
    assert predicted_calls(row) == [("get_weather", {"city": "Paris"})]
    assert tool_call_accuracy(row, ref(W)) == 1.0


def test_consecutive_tool_messages_are_accepted() -> None:
    """The reference output scores rows with two tool messages in a row (exact_two_in_order)."""
    row = [human(), ai(W, S), tool(), tool(), tool()]
    assert tool_call_accuracy(row, ref(W, S)) == 1.0


def test_null_tool_calls_and_metadata() -> None:
    row = [human(), {"content": "", "type": "ai", "tool_calls": None, "metadata": None}, ai(W)]
    assert tool_call_accuracy(row, ref(W)) == 1.0


@pytest.mark.parametrize(
    ("user_input", "reference", "field", "reason"),
    [
        (
            [human(), {"content": "", "type": "ai", "tool_calls": [{"name": "f", "args": '{"a": 1}'}]}],
            ref(("f", {"a": 1})),
            "user_input[1].tool_calls[0].args",
            "got a string",
        ),
        ([human(), ai(("f", {}))], [{"name": "f", "args": '{"a": 1}'}], "reference_tool_calls[0].args", "got a string"),
        (
            [human(), {"content": "x", "type": "assistant"}],
            [],
            "user_input[1].type",
            "unknown message type 'assistant'",
        ),
        ([human(), {"content": "x", "type": "system"}], [], "user_input[1].type", "unknown message type"),
        ([{"content": "x"}], [], "user_input[0].type", "missing"),
        ([{"content": None, "type": "human"}], [], "user_input[0].content", "got null"),
        ([{"content": None, "type": "ai", "tool_calls": []}], [], "user_input[0].content", "got null"),
        ([{"type": "tool"}], [], "user_input[0].content", "missing"),
        ([{"content": 5, "type": "human"}], [], "user_input[0].content", "got a number"),
        ([human(), ai(W)], None, "reference_tool_calls", "missing"),
        ("hello", [], "user_input", "got a string"),
        (None, [], "user_input", "missing"),
        ([human(), "ai: hello"], [], "user_input[1]", "got a string"),
        (
            [{"content": "", "type": "ai", "tool_calls": {"name": "f", "args": {}}}],
            [],
            "user_input[0].tool_calls",
            "got an object",
        ),
        (
            [{"content": "", "type": "ai", "tool_calls": [{"args": {}}]}],
            [],
            "user_input[0].tool_calls[0].name",
            "missing",
        ),
        (
            [{"content": "", "type": "ai", "tool_calls": [{"name": 3, "args": {}}]}],
            [],
            "user_input[0].tool_calls[0].name",
            "got a number",
        ),
        (
            [{"content": "", "type": "ai", "tool_calls": [{"name": "f"}]}],
            [],
            "user_input[0].tool_calls[0].args",
            "missing",
        ),
        (
            [{"content": "", "type": "ai", "tool_calls": [{"name": "f", "args": [1]}]}],
            [],
            "user_input[0].tool_calls[0].args",
            "got a list",
        ),
        ([{"content": "", "type": "human", "metadata": "x"}], [], "user_input[0].metadata", "got a string"),
        ([human()], "[]", "reference_tool_calls", "got a string"),
    ],
)
def test_rows_ragas_rejects(user_input: Any, reference: Any, field: str, reason: str) -> None:
    with pytest.raises(RowError) as info:
        tool_call_accuracy(user_input, reference)
    assert info.value.field == field
    assert reason in info.value.reason


def test_rejected_rows_are_row_errors_in_evaluate() -> None:
    good = CASES[0]
    bad = {"user_input": [human(), {"content": None, "type": "ai"}], "reference_tool_calls": []}
    result = evaluate("tool_call_accuracy", [good, bad, {"reference_tool_calls": []}, good])
    assert result.column("tool_call_accuracy")[[0, 3]].tolist() == [1.0, 1.0]
    assert sorted(result.errors) == [1, 2]
    assert result.errors[1].field == "user_input[1].content"
    assert result.errors[2].field == "user_input"
    (stats,) = result.aggregate_scores
    assert (stats["count"], stats["nan_count"], stats["mean"]) == (2, 2, 1.0)


def ragas_literal(user_input: list[dict[str, Any]], reference: list[dict[str, Any]], strict_order: bool) -> float:
    """A line-by-line transcription of RAGAS 0.4.3 ToolCallAccuracy._multi_turn_ascore (with
    ExactMatch on str() of the arguments), to check the optimised implementation against."""

    def key(tc: dict[str, Any]) -> tuple[str, ...]:
        out = [tc["name"]]
        for name in sorted(tc["args"]):
            out += [name, str(tc["args"][name])]
        return tuple(out)

    def arg_score(preds: dict[str, Any], refs: dict[str, Any]) -> float:
        if not refs and not preds:
            return 1.0
        if not refs:
            return 0.0
        score = 0.0
        for arg in refs.keys():
            if arg in preds:
                score += float(str(preds[arg]) == str(refs[arg]))
        return score / len(refs.keys())

    pred = []
    for item in user_input:
        if item["type"] == "ai" and item.get("tool_calls") is not None:
            pred.extend(item["tool_calls"])
    ref = reference
    if not pred and not ref:
        return 1.0
    if not pred or not ref:
        return 0.0
    if not strict_order:
        pred, ref = sorted(pred, key=key), sorted(ref, key=key)
    pred_seq, ref_seq = [tc["name"] for tc in pred], [tc["name"] for tc in ref]
    aligned = int(pred_seq == ref_seq if strict_order else sorted(pred_seq) == sorted(ref_seq))
    score = 0.0
    compared = min(len(pred), len(ref))
    for r, p in zip(ref, pred):
        if r["name"] == p["name"]:
            score += arg_score(p["args"], r["args"])
    score /= len(ref)
    if compared < len(ref):
        score *= compared / len(ref)
    return score * aligned


def random_rows(n: int, seed: int) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """Few names and few values, so duplicates, ties and partial matches are common."""
    rng = random.Random(seed)
    values = [1, "1", 1.0, True, "x", None, [1], {"k": 1}]

    def call() -> dict[str, Any]:
        args = {rng.choice("abc"): rng.choice(values) for _ in range(rng.randint(0, 3))}
        return {"name": rng.choice(["f", "g"]), "args": args}

    out = []
    for _ in range(n):
        reference = [call() for _ in range(rng.randint(0, 4))]
        predicted = [dict(c, args=dict(c["args"])) for c in reference]
        for c in predicted:
            if rng.random() < 0.3 and c["args"]:
                c["args"][rng.choice(list(c["args"]))] = rng.choice(values)
        if rng.random() < 0.5:
            rng.shuffle(predicted)
        if rng.random() < 0.2:  # one call too many or too few
            predicted = predicted + [call()] if rng.random() < 0.5 else predicted[:-1]
        split = rng.randint(0, len(predicted))
        user_input = [
            human(),
            {"content": "", "type": "ai", "tool_calls": predicted[:split]},
            *([tool()] if split else []),  # RAGAS refuses a tool message answering no call
            {"content": "", "type": "ai", "tool_calls": predicted[split:] or None},
        ]
        out.append((user_input, reference))
    return out


@pytest.mark.parametrize("strict_order", [True, False])
def test_matches_a_literal_transcription_of_ragas(strict_order: bool) -> None:
    rows = random_rows(5000, seed=1)
    got = [tool_call_accuracy(u, r, strict_order) for u, r in rows]
    want = [ragas_literal(u, r, strict_order) for u, r in rows]
    assert got == want
    assert len(set(want)) > 5  # the rows exercise many different scores


# RAGAS 0.4.3's verdict on rows built to hit each MultiTurnSample check (its pydantic types,
# the message models, validate_user_input's order rules) and ToolCallAccuracy's assertion;
# generated by scripts/make_ragas_cases.py with RAGAS's own code.
VALIDATION = [json.loads(line) for line in (DATA / "validation.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("case", VALIDATION, ids=[c["id"] for c in VALIDATION])
def test_rows_are_rejected_exactly_where_ragas_rejects_them(case: dict[str, Any]) -> None:
    result = evaluate("tool_call_accuracy", [case["row"]])
    unordered = evaluate("tool_call_accuracy", [case["row"]], config={"strict_order": False})
    if "rejected" in case["ragas"] or "difference" in case:
        assert result.errors[0].field == case["field"], (result.errors, case["ragas"])
        assert unordered.errors[0].field == case["field"]
    else:
        assert result.errors == {}, result.errors
        assert result.column("tool_call_accuracy").tolist() == [case["ragas"]["score"]]
        assert unordered.column("tool_call_accuracy").tolist() == [case["ragas"]["score_unordered"]]


def test_validation_cases_cover_every_ragas_rule() -> None:
    rejected = {c["ragas"]["rejected"] for c in VALIDATION if "rejected" in c["ragas"]}
    for rule in (
        "ToolMessage must be preceded by an AIMessage somewhere in the conversation",
        "ToolMessage must follow an AIMessage where tools were called",
        "ToolMessage must follow an AIMessage or another ToolMessage",
        "Reference tool calls is not set",
    ):
        assert any(rule in r for r in rejected), rule
    for field in ("reference", "rubrics", "reference_topics", "reference_tool_calls", "user_input"):
        assert any(r.startswith(field) for r in rejected), field


@pytest.mark.parametrize(
    ("user_input", "index", "reason"),
    [
        ([human(), tool(), ai(W)], 1, "preceded by an AIMessage"),
        ([tool()], 0, "preceded by an AIMessage"),
        ([human(), ai(content="thinking"), tool()], 2, "AIMessage where tools were called"),
        ([human(), {"content": "", "type": "ai", "tool_calls": []}, tool()], 2, "AIMessage where tools were called"),
        ([human(), ai(W), tool(), human(), tool()], 4, "AIMessage or another ToolMessage"),
    ],
)
def test_a_tool_message_out_of_place_names_the_message(user_input: list[Any], index: int, reason: str) -> None:
    with pytest.raises(RowError) as info:
        tool_call_accuracy(user_input, ref(W))
    assert info.value.field == f"user_input[{index}]"
    assert reason in info.value.reason


def test_python_rows_with_non_string_keys_are_rejected() -> None:
    """RAGAS types args and metadata as Dict[str, Any]; JSON keys are always strings, Python's
    need not be."""
    with pytest.raises(RowError, match="keys must be strings") as info:
        tool_call_accuracy([human(), ai(("f", {1: "x"}))], ref(("f", {"1": "x"})))
    assert info.value.field == "user_input[1].tool_calls[0].args"
    with pytest.raises(RowError) as info:
        tool_call_accuracy([{"content": "", "type": "human", "metadata": {2: 1}}], [])
    assert info.value.field == "user_input[0].metadata"
