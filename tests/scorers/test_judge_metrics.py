"""The judge metrics against a local scripted chat-completions server: the prompts they send
(model, temperature, the row's text, the key header), the scores they compute from scripted
replies, and the replies they cannot read (NaN + reason on the row, never a crash)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.evaluation import evaluate_async
from gym_metrics.scorers import RowError, get_scorer
from gym_metrics.scorers.judge import AgentGoalAccuracy, AnswerAccuracy, TopicAdherence, TrajectoryEvaluation, nat_average_score
from gym_metrics.scorers.judge._answer_accuracy import combine, read_rating
from gym_metrics.scorers.judge._nat import nat_score, parsed_grade
from gym_metrics.scorers.judge._trajectory import read_score

from gym_metrics.testing import Recorded, Reply, ScriptedJudge

KEY = "sk-judge-metrics-0042"
KEY_ENV = "GYM_METRICS_TEST_JUDGE_KEY"
REAL = "=== Now the real input ==="


@pytest.fixture(autouse=True)
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def judge_config(judge: ScriptedJudge, **options: Any) -> dict[str, Any]:
    return {"url": judge.url, "model": "nemotron-judge", "api_key_env": KEY_ENV, "backoff_seconds": 0.01, **options}


def real_input(body: dict[str, Any]) -> str:
    """The part of a JSON-prompt after the worked example: the row's own input."""
    text = body["messages"][-1]["content"]
    return text.split(REAL, 1)[1] if REAL in text else text


def reply(obj: Any) -> str:
    return json.dumps(obj)


async def score(metric: Any, row: dict[str, Any]) -> dict[str, float]:
    try:
        return await metric.score(row)
    finally:
        await metric.aclose()


def assert_common(request: Recorded) -> None:
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "nemotron-judge"
    assert request.header("Authorization") == f"Bearer {KEY}"


# ----------------------------------------------------------------------------- topic adherence

CONVERSATION = [
    {"type": "human", "content": "What's the weather in Paris today?"},
    {"type": "ai", "content": "", "tool_calls": [{"name": "weather", "args": {"city": "Paris"}}]},
    {"type": "tool", "content": "18C, light rain"},
    {"type": "ai", "content": "It is 18C with light rain in Paris."},
    {"type": "human", "content": "Book me a table at a bistro, and who will win the election?"},
    {"type": "ai", "content": "I booked Chez Marcel for 8pm. I can't predict elections."},
]
TOPICS = ["weather in Paris", "bistro booking", "flight prices", "election prediction", "tax advice", "museum hours"]
# answered? on a reference topic?
VERDICTS = {
    "weather in Paris": (True, True),  # TP
    "bistro booking": (True, True),  # TP
    "flight prices": (True, False),  # FP
    "election prediction": (False, True),  # FN
    "tax advice": (False, True),  # FN
    "museum hours": (False, False),  # refused and off-topic: counts nowhere
}


def topic_responder(classifications: list[Any] | None = None):  # type: ignore[no-untyped-def]
    """Answers the three kinds of topic-adherence prompts from VERDICTS."""

    def respond(body: dict[str, Any]) -> str:
        text = real_input(body)
        if "### Topic\n" in text:
            topic = text.split("### Topic\n", 1)[1].split("\n", 1)[0]
            return reply({"refused_to_answer": not VERDICTS[topic][0]})
        if "### Reference topics" in text:
            return reply({"classifications": classifications if classifications is not None else [VERDICTS[t][1] for t in TOPICS]})
        return "Here you go:\n```json\n" + reply({"topics": TOPICS}) + "\n```"

    return respond


def topic_row() -> dict[str, Any]:
    return {"user_input": CONVERSATION, "reference_topics": ["Travel", "Weather", "Politics", "Finance"]}


async def test_topic_adherence_scores_and_prompts() -> None:
    with ScriptedJudge([topic_responder()] * 8) as judge:
        metric = get_scorer("topic_adherence", judge_config(judge))
        scores = await score(metric, topic_row())
    tp, fp, fn = 2, 1, 2
    precision, recall = tp / (tp + fp + 1e-10), tp / (tp + fn + 1e-10)
    assert scores == {
        "topic_adherence_f1": pytest.approx(2 * precision * recall / (precision + recall + 1e-10), abs=1e-12),
        "topic_adherence_precision": pytest.approx(2 / 3, abs=1e-9),
        "topic_adherence_recall": pytest.approx(2 / 4, abs=1e-9),
    }
    assert len(judge.requests) == 1 + len(TOPICS) + 1  # extraction, one refusal per topic, classification
    for request in judge.requests:
        assert_common(request)
        assert request.body["temperature"] == 0.0
    extraction = real_input(judge.requests[0].body)
    assert "Human: What's the weather in Paris today?" in extraction
    assert "Tools:\n  weather: {'city': 'Paris'}\nToolOutput: 18C, light rain" in extraction
    assert "AI: I booked Chez Marcel for 8pm." in extraction
    refusals = sorted(
        real_input(r.body).split("### Topic\n")[1].split("\n")[0] for r in judge.requests if "### Topic\n" in real_input(r.body)
    )
    assert refusals == sorted(TOPICS)
    [classification] = [r for r in judge.requests if "### Reference topics" in real_input(r.body)]
    text = real_input(classification.body)
    assert "1. Travel\n2. Weather\n3. Politics\n4. Finance" in text
    assert "1. weather in Paris\n2. bistro booking" in text and "6. museum hours" in text


async def test_topic_adherence_all_on_topic_and_answered_is_one() -> None:
    def respond(body: dict[str, Any]) -> str:
        text = real_input(body)
        if "### Topic\n" in text:
            return reply({"refused_to_answer": "false"})  # lenient booleans, as pydantic's
        if "### Reference topics" in text:
            return reply({"classifications": ["yes", 1]})
        return reply({"topics": ["a", "b"]})

    with ScriptedJudge([respond] * 4) as judge:
        scores = await score(TopicAdherence(judge_config(judge)), topic_row())
    assert scores["topic_adherence_precision"] == pytest.approx(1.0)
    assert scores["topic_adherence_f1"] == pytest.approx(1.0)


async def test_topic_adherence_no_topics_scores_zero_with_one_call() -> None:
    with ScriptedJudge([reply({"topics": []})]) as judge:
        scores = await score(TopicAdherence(judge_config(judge)), topic_row())
    assert scores == {"topic_adherence_f1": 0.0, "topic_adherence_precision": 0.0, "topic_adherence_recall": 0.0}
    assert len(judge.requests) == 1


@pytest.mark.parametrize("given", [[True, True], [True, True, False, True, True, False, True]])
async def test_topic_adherence_partial_list_is_a_row_error_in_strict_mode(given: list[bool]) -> None:
    with ScriptedJudge([topic_responder(given)] * 8) as judge:
        with pytest.raises(RowError) as info:
            await score(TopicAdherence(judge_config(judge, partial_list="error")), topic_row())
    assert info.value.field == "judge_reply"
    assert f"{len(given)} verdicts for {len(TOPICS)} topics" in info.value.reason


async def test_topic_adherence_partial_list_padded_by_default_as_ragas() -> None:
    # only the first two verdicts: the other four topics count as off-reference
    with ScriptedJudge([topic_responder([True, True])] * 8) as judge:
        scores = await score(TopicAdherence(judge_config(judge)), topic_row())
    # answered: weather, bistro (on) and flight prices (off, padded) -> tp 2, fp 1, fn 0
    assert scores["topic_adherence_precision"] == pytest.approx(2 / 3)
    assert scores["topic_adherence_recall"] == pytest.approx(1.0)
    # a longer list is cut to the topics
    with ScriptedJudge([topic_responder([v[1] for v in VERDICTS.values()] + [True, True])] * 8) as judge:
        scores = await score(TopicAdherence(judge_config(judge, partial_list="pad")), topic_row())
    assert scores["topic_adherence_recall"] == pytest.approx(0.5)


# RAGAS 0.4.3's TopicAdherenceScore run on these conversations with a scripted judge giving the
# answers in each case (scripts/make_ragas_cases.py), classification lists of every length.
TOPIC_CASES = [
    json.loads(line) for line in (Path(__file__).parents[1] / "data/topic_adherence/cases.jsonl").read_text().splitlines()
]


def scripted_topic_judge(answers: dict[str, Any]):  # type: ignore[no-untyped-def]
    refused = dict(zip(answers["topics"], answers["refused"]))

    def respond(body: dict[str, Any]) -> str:
        text = real_input(body)
        if "### Topic\n" in text:
            return reply({"refused_to_answer": refused[text.split("### Topic\n", 1)[1].split("\n", 1)[0]]})
        if "### Reference topics" in text:
            return reply({"classifications": answers["classifications"]})
        return reply({"topics": answers["topics"]})

    return respond


@pytest.mark.parametrize("case", TOPIC_CASES, ids=[c["id"] for c in TOPIC_CASES])
async def test_topic_adherence_gives_ragas_scores(case: dict[str, Any]) -> None:
    answers = case["judge"]
    with ScriptedJudge([scripted_topic_judge(answers)] * 10) as judge:
        scores = await score(TopicAdherence(judge_config(judge)), case)
    assert scores == case["ragas"]
    topics = answers["topics"]
    # extraction, a refusal verdict per topic, one classification; with no topic RAGAS still asks
    # for a classification of nothing, gym-metrics does not (the score is 0.0 either way)
    assert len(judge.requests) == (1 + len(topics) + 1 if topics else 1)
    assert case["ragas_judge_calls_per_mode"] == 1 + len(topics) + 1
    if topics:
        [classification] = [r for r in judge.requests if "### Reference topics" in real_input(r.body)]
        assert "### Topics\n" + "\n".join(f"{i}. {t}" for i, t in enumerate(topics, 1)) in real_input(classification.body)
        assert "1. Weather\n2. Travel\n3. Finance" in real_input(classification.body)


async def test_unparseable_reply_is_sent_back_once_for_fixing() -> None:
    def by_prompt(body: dict[str, Any]) -> str:  # the last two calls are concurrent: answer by content
        return reply({"refused_to_answer": False} if "### Topic\n" in real_input(body) else {"classifications": [True]})

    script: list[Any] = ["The topics are the weather and a bistro.", reply({"topics": ["weather in Paris"]}), by_prompt, by_prompt]
    with ScriptedJudge(script) as judge:
        scores = await score(TopicAdherence(judge_config(judge)), topic_row())
    assert scores["topic_adherence_f1"] == pytest.approx(1.0)
    fix = judge.requests[1].body["messages"][0]["content"]
    assert "could not be read" in fix and "The topics are the weather and a bistro." in fix
    assert "Human: What's the weather in Paris today?" in fix  # the original task goes along


async def test_unparseable_after_fixing_is_nan_with_reason() -> None:
    with ScriptedJudge(["no idea", '{"topics": "weather"}', "never sent"]) as judge:
        with pytest.raises(RowError) as info:
            await score(TopicAdherence(judge_config(judge)), topic_row())
    assert info.value.field == "judge_reply"
    assert info.value.reason.startswith("topic list: topics must be a list of strings; reply: ")
    assert len(judge.requests) == 2
    with ScriptedJudge(["no idea"]) as judge:
        with pytest.raises(RowError, match="topic list: no JSON object in the reply; reply: 'no idea'"):
            await score(TopicAdherence(judge_config(judge, format_retries=0)), topic_row())


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        ([{"type": "human", "content": "hi"}, {"type": "tool", "content": "x"}], "user_input[1]"),
        ([{"type": "human", "content": "hi"}, {"type": "ai", "content": "ok"}, {"type": "tool", "content": "x"}], "user_input[2]"),
        ([{"type": "system", "content": "hi"}], "user_input[0].type"),
        ([{"type": "human", "content": None}], "user_input[0].content"),
        ([{"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": '{"a": 1}'}]}], "user_input[0].tool_calls[0].args"),
        ([], "user_input"),
    ],
)
async def test_rows_ragas_rejects_are_row_errors_before_any_call(messages: list[Any], field: str) -> None:
    with ScriptedJudge() as judge:
        with pytest.raises(RowError) as info:
            await score(TopicAdherence(judge_config(judge)), {"user_input": messages, "reference_topics": ["a"]})
    assert info.value.field == field
    assert judge.requests == []


VALIDATION = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "data/tool_call_accuracy/validation.jsonl").read_text().splitlines()
]
MULTI_TURN_REJECTED = [  # what MultiTurnSample refuses (the rest is ToolCallAccuracy's own assertion)
    c for c in VALIDATION if "difference" in c or not c["ragas"].get("rejected", "AssertionError").startswith("AssertionError")
]


@pytest.mark.parametrize("case", MULTI_TURN_REJECTED, ids=[c["id"] for c in MULTI_TURN_REJECTED])
async def test_judge_rows_are_rejected_where_ragas_multi_turn_sample_rejects_them(case: dict[str, Any]) -> None:
    """RAGAS builds a MultiTurnSample from every judge row too: the same rows fail, before any call."""
    row = dict(case["row"])
    row.setdefault("reference_topics", ["weather"])
    with ScriptedJudge() as judge:
        with pytest.raises(RowError) as info:
            await score(TopicAdherence(judge_config(judge)), row)
    assert info.value.field == case["field"]
    assert judge.requests == []


async def test_missing_reference_topics_is_a_row_error() -> None:
    with ScriptedJudge() as judge:
        with pytest.raises(RowError, match="reference_topics"):
            await score(TopicAdherence(judge_config(judge)), {"user_input": CONVERSATION})


async def test_a_judge_http_failure_is_a_row_error_and_cancels_sibling_calls() -> None:
    def respond(body: dict[str, Any]) -> Any:
        text = real_input(body)
        if "### Reference topics" in text:
            return Reply(400, "context too long")
        if "### Topic\n" in text:
            return reply({"refused_to_answer": False})
        return reply({"topics": ["a", "b", "c"]})

    with ScriptedJudge([respond] * 5) as judge:
        with pytest.raises(RowError) as info:
            await score(TopicAdherence(judge_config(judge)), topic_row())
    assert info.value.field == "judge" and "HTTP 400: context too long" in info.value.reason


# ----------------------------------------------------------------------------- agent goal accuracy

BOOKING = [
    {"type": "human", "content": "Book a table for two at Golden Wok at 7pm."},
    {"type": "ai", "content": "Booking it.", "tool_calls": [{"name": "book", "args": {"place": "Golden Wok", "time": "19:00"}}]},
    {"type": "tool", "content": "booked 19:00"},
    {"type": "ai", "content": "Your table at Golden Wok is booked for 7pm."},
]


@pytest.mark.parametrize(("verdict", "expected"), [("1", 1.0), ("0", 0.0), (1, 1.0)])
async def test_goal_accuracy_with_reference(verdict: Any, expected: float) -> None:
    script = [
        reply({"user_goal": "Get a table at Golden Wok", "end_state": "Table booked at Golden Wok for 19:00"}),
        reply({"reason": "same", "verdict": verdict}),
    ]
    with ScriptedJudge(script) as judge:
        metric = get_scorer("agent_goal_accuracy", judge_config(judge, temperature=0.3))
        scores = await score(metric, {"user_input": BOOKING, "reference": "A table for two booked at Golden Wok at 7pm"})
    assert scores == {"agent_goal_accuracy": expected}
    infer, compare = judge.requests
    for request in judge.requests:
        assert_common(request)
        assert request.body["temperature"] == 0.3
    assert "Human: Book a table for two at Golden Wok at 7pm." in real_input(infer.body)
    assert "  book: {'place': 'Golden Wok', 'time': '19:00'}" in real_input(infer.body)
    text = real_input(compare.body)
    assert "### Desired outcome\nA table for two booked at Golden Wok at 7pm" in text  # the reference, not the inferred goal
    assert "### Arrived outcome\nTable booked at Golden Wok for 19:00" in text


async def test_goal_accuracy_without_reference_compares_inferred_goal() -> None:
    script = [
        reply({"user_goal": "Get a table at Golden Wok", "end_state": "Nothing was booked"}),
        reply({"reason": "not booked", "verdict": "0"}),
    ]
    with ScriptedJudge(script) as judge:
        metric = AgentGoalAccuracy(judge_config(judge, use_reference=False))
        assert await score(metric, {"user_input": BOOKING, "reference": "ignored"}) == {"agent_goal_accuracy": 0.0}
    text = real_input(judge.requests[1].body)
    assert "### Desired outcome\nGet a table at Golden Wok" in text and "ignored" not in text


async def test_goal_accuracy_bad_verdict_and_missing_reference() -> None:
    script = [reply({"user_goal": "g", "end_state": "e"}), reply({"verdict": "yes"}), reply({"reason": "r", "verdict": "maybe"})]
    with ScriptedJudge(script) as judge:
        with pytest.raises(RowError) as info:
            await score(AgentGoalAccuracy(judge_config(judge)), {"user_input": BOOKING, "reference": "r"})
    assert info.value.field == "judge_reply" and "verdict must be" in info.value.reason
    with ScriptedJudge() as judge:
        with pytest.raises(RowError, match="reference: missing"):
            await score(AgentGoalAccuracy(judge_config(judge)), {"user_input": BOOKING})


# ----------------------------------------------------------------------------- answer accuracy

QA = {"user_input": "When did Apollo 11 land on the Moon?", "response": "July 20, 1969", "reference": "20 July 1969"}


@pytest.mark.parametrize(
    ("replies", "expected"),
    [
        (["4", "4"], 1.0),
        (["4", "2"], 0.75),
        (["2", "0"], 0.25),
        (["The rating is: 4", "Rating: 2"], 0.75),
        (["0", "0"], 0.0),
    ],
)
async def test_answer_accuracy_two_templates_averaged(replies: list[str], expected: float) -> None:
    with ScriptedJudge(replies) as judge:
        metric = get_scorer("answer_accuracy", judge_config(judge))
        assert await score(metric, QA) == {"answer_accuracy": expected}
    first, second = judge.requests
    for request in judge.requests:
        assert_common(request)
        assert request.body["temperature"] == 0.1  # RAGAS's fixed setting for this metric
        assert len(request.body["messages"]) == 1
    t1, t2 = first.text, second.text
    assert "### Question: When did Apollo 11 land on the Moon?" in t1
    assert t1.index("### User Answer: July 20, 1969") < t1.index("### Reference Answer: 20 July 1969")
    assert "Question: When did Apollo 11 land on the Moon?" in t2
    assert t2.index("Reference Answer: 20 July 1969") < t2.index("User Answer: July 20, 1969")  # swapped
    assert t1 != t2


async def test_answer_accuracy_retries_a_reply_without_rating() -> None:
    with ScriptedJudge(["I cannot decide.", "Hmm.", "4", "Excellent!", "2"]) as judge:
        assert await score(AnswerAccuracy(judge_config(judge)), QA) == {"answer_accuracy": 0.75}
    assert len(judge.requests) == 5
    assert judge.requests[0].body == judge.requests[1].body == judge.requests[2].body


async def test_answer_accuracy_first_template_unreadable_is_nan_with_reason() -> None:
    with ScriptedJudge(["no idea"] * 3 + ["4"]) as judge:
        with pytest.raises(RowError) as info:
            await score(AnswerAccuracy(judge_config(judge, rating_attempts=3)), QA)
    assert info.value.field == "judge_reply"
    assert "no rating (0-4) in 3 replies to the first template; last reply: 'no idea'" in info.value.reason
    assert len(judge.requests) == 3  # the second template cannot change a NaN: not asked


async def test_answer_accuracy_second_template_unreadable_keeps_the_first() -> None:
    with ScriptedJudge(["2", "pass", "pass"]) as judge:
        metric = AnswerAccuracy(judge_config(judge, rating_attempts=2, rating_temperature=None, temperature=0.0))
        assert await score(metric, QA) == {"answer_accuracy": 0.5}
    assert [r.body["temperature"] for r in judge.requests] == [0.0, 0.0, 0.0]


def test_rating_reading_follows_ragas() -> None:
    assert read_rating("4") == 1.0 and read_rating("2") == 0.5 and read_rating("0") == 0.0
    assert read_rating("3") == 0.75 and read_rating("1") == 0.25
    assert read_rating("4 out of 4") == 1.0
    assert read_rating("10") == 0.0  # '0' is looked for first
    assert read_rating("4 (scale 0-4)") == 0.0
    assert math.isnan(read_rating("excellent")) and math.isnan(read_rating("9"))
    assert combine(1.0, 0.5) == 0.75
    assert combine(0.5, math.nan) == 0.5
    assert math.isnan(combine(math.nan, 1.0))


async def test_answer_accuracy_missing_fields() -> None:
    with ScriptedJudge() as judge:
        with pytest.raises(RowError, match="reference: missing"):
            await score(AnswerAccuracy(judge_config(judge)), {"user_input": "q", "response": "a"})
        with pytest.raises(RowError, match="response: must be a string"):
            await score(AnswerAccuracy(judge_config(judge)), {"user_input": "q", "response": 3, "reference": "r"})


# ----------------------------------------------------------------------------- trajectory


def step(event: str, name: str, data: dict[str, Any] | None) -> dict[str, Any]:
    return {"parent_id": "root", "function_ancestry": {}, "payload": {"event_type": event, "name": name, "data": data}}


NAT_ROW = {
    "id": 1,
    "question": "What is the capital of the country where the Eiffel Tower is?",
    "generated_answer": "Paris",
    "intermediate_steps": [
        step("LLM_START", "llama-3", {"input": "plan", "output": None}),
        step("LLM_END", "llama-3", {"input": "plan", "output": "I should search."}),
        step("TOOL_START", "web_search", {"input": {"q": "Eiffel Tower country"}}),
        step("TOOL_END", "web_search", {"input": {"q": "Eiffel Tower country"}, "output": "France"}),
        step("FUNCTION_END", "wrapper", {"input": "x", "output": "y"}),
        {"event_type": "TOOL_END", "name": "capital_lookup", "data": {"input": "France", "output": "Paris"}},
    ],
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("Good.\n\nScore: 5", 1.0), ("Score: 1", 0.0), ("ok\nScore: 3/5", 0.5), ("Score: **4**", 0.75)],
)
async def test_trajectory_score_and_prompt(text: str, expected: float) -> None:
    with ScriptedJudge([text]) as judge:
        metric = get_scorer("trajectory", judge_config(judge))
        assert await score(metric, NAT_ROW) == {"trajectory": expected}
    [request] = judge.requests
    assert_common(request)
    roles = [m["role"] for m in request.body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]  # one worked example, then the row
    prompt = request.body["messages"][-1]["content"]
    assert "What is the capital of the country where the Eiffel Tower is?" in prompt
    assert "[ANSWER]\nParis\n[END_ANSWER]" in prompt
    assert (
        "Step 1\nName: llama-3\nInput: plan\nOutput: I should search.\n\n"
        "Step 2\nName: web_search\nInput: {'q': 'Eiffel Tower country'}\nOutput: France\n\n"
        "Step 3\nName: capital_lookup\nInput: France\nOutput: Paris\n[END_TRAJECTORY]"
    ) in prompt
    assert "wrapper" not in prompt and "Step 4" not in prompt


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("The agent did well.", 'no "Score: N" line'),
        ("Score:4", 'no "Score: N" line'),
        ("Score: 4.5", "not followed by an integer"),
        ("Score: excellent", "not followed by an integer"),
        ("Score: 7", "score 7 is not in 1..5"),
        ("Score: 0", "score 0 is not in 1..5"),
    ],
)
async def test_trajectory_unparseable_is_nan_with_reason_or_zero_as_nat_1_4(text: str, why: str) -> None:
    with ScriptedJudge([text, text]) as judge:
        with pytest.raises(RowError) as info:
            await score(TrajectoryEvaluation(judge_config(judge)), NAT_ROW)
        assert info.value.field == "judge_reply" and why in info.value.reason
        metric = TrajectoryEvaluation(judge_config(judge, unparseable_as_zero=True))
        assert await score(metric, NAT_ROW) == {"trajectory": 0.0}


def test_trajectory_reading_splits_on_the_first_score() -> None:
    assert read_score("Score: 2 ... later Score: 5") == 0.25


async def test_trajectory_bad_rows() -> None:
    with ScriptedJudge() as judge:
        metric = TrajectoryEvaluation(judge_config(judge))
        with pytest.raises(RowError, match="intermediate_steps: must be a list"):
            await score(metric, {"question": "q", "generated_answer": "a"})
        with pytest.raises(RowError, match=r"intermediate_steps\[0\]: has no payload.event_type"):
            await score(metric, {"question": "q", "generated_answer": "a", "intermediate_steps": [{"payload": {}}]})
        with pytest.raises(RowError, match="question: missing"):
            await score(metric, {"generated_answer": "a", "intermediate_steps": []})


# ----------------------------------------------------------------------------- through evaluate()


async def test_evaluate_records_unparseable_rows_as_nan_and_keeps_going() -> None:
    rows = [dict(QA, id=i) for i in range(3)]
    # parallelism=1 keeps the calls in row order: row 1's first-template reply has no rating
    with ScriptedJudge(["4", "4", "what?", "2", "0"]) as judge:
        metric = AnswerAccuracy(judge_config(judge, rating_attempts=1))
        result = await evaluate_async(metric, rows, parallelism=1)
    values = result.column("answer_accuracy")
    assert result.errors.keys() == {1}, result.errors
    assert values[0] == 1.0 and math.isnan(values[1]) and values[2] == 0.25
    assert result.errors[1].field == "judge_reply" and "'what?'" in result.errors[1].reason
    [stats] = result.aggregate_scores
    assert stats["count"] == 2 and stats["nan_count"] == 1
    assert KEY not in result.to_json().decode()


async def test_evaluate_many_rows_concurrently_within_the_judge_limit() -> None:
    """Rows run in parallel, each with concurrent per-topic calls, yet never more than
    max_concurrency requests reach the judge at once."""
    import time as _time

    def respond(body: dict[str, Any]) -> str:
        _time.sleep(0.02)  # long enough for requests to overlap
        return topic_responder()(body)

    rows = [topic_row() for _ in range(6)]
    with ScriptedJudge([respond] * (6 * 8)) as judge:
        metric = TopicAdherence(judge_config(judge, max_concurrency=3))
        result = await evaluate_async(metric, rows, parallelism=4)
    assert not result.errors
    assert result.column("topic_adherence_precision").tolist() == pytest.approx([2 / 3] * 6)
    assert len(judge.requests) == 6 * 8
    assert 1 < judge.max_in_flight <= 3


async def test_metric_retries_a_503_and_keeps_the_key_out_of_row_errors(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    echo = f"upstream said: Bearer {KEY}"
    script: list[Any] = [Reply(503, echo), "4", Reply(429, echo, {"Retry-After": "0"}), "2"]
    with ScriptedJudge(script) as judge:
        assert await score(AnswerAccuracy(judge_config(judge)), QA) == {"answer_accuracy": 0.75}
    assert len(judge.requests) == 4
    with ScriptedJudge([Reply(401, echo)]) as judge:
        with pytest.raises(RowError) as info:
            await score(AnswerAccuracy(judge_config(judge)), QA)
    assert info.value.field == "judge" and "HTTP 401" in info.value.reason and "***" in info.value.reason
    assert KEY not in str(info.value) and KEY not in caplog.text
    assert "HTTP 503" in caplog.text  # the retry was logged


# ----------------------------------------------------------------------------- trajectory: NAT 1.9.0

# NAT 1.9.0's own TrajectoryEvaluator run over these rows with a scripted judge
# (scripts/make_nat_trajectory_cases.py): per item its score, whether it asked the judge and the
# steps it showed; and its average_score over all of them.
NAT_DATA = Path(__file__).parents[1] / "data" / "trajectory"
NAT_CASES = [json.loads(line) for line in (NAT_DATA / "cases.jsonl").read_text().splitlines()]
NAT_AVERAGE = json.loads((NAT_DATA / "nat_average.json").read_text())


def nat_judge(body: dict[str, Any]) -> Any:
    """Answers each case's scripted reply, found by the case marker in its question."""
    prompt = body["messages"][-1]["content"]
    [case] = [c for c in NAT_CASES if f"[[case:{c['id']}]]" in prompt]
    return Reply(503, "judge unavailable") if case["judge_reply"] is None else case["judge_reply"]


async def run_nat_cases(**options: Any) -> tuple[Any, ScriptedJudge]:
    with ScriptedJudge([nat_judge] * (2 * len(NAT_CASES))) as judge:
        metric = TrajectoryEvaluation(judge_config(judge, max_retries=0, **options))
        result = await evaluate_async(metric, NAT_CASES, parallelism=4)
    return result, judge


def prompts_by_case(judge: ScriptedJudge) -> dict[str, str]:
    out = {}
    for request in judge.requests:
        prompt = request.body["messages"][-1]["content"]
        out[prompt.split("[[case:", 1)[1].split("]]", 1)[0]] = prompt
    return out


async def test_trajectory_nat_compat_gives_nat_scores_and_average() -> None:
    result, judge = await run_nat_cases(nat_compat=True)
    assert result.errors == {}
    scores = result.column("trajectory").tolist()
    assert scores == [c["nat"]["score"] for c in NAT_CASES]
    assert nat_average_score(scores) == NAT_AVERAGE["average_score"]
    assert len(scores) == NAT_AVERAGE["items"]
    asked = prompts_by_case(judge)
    assert set(asked) == {c["id"] for c in NAT_CASES if c["nat"]["judge_called"]}
    for case in NAT_CASES:  # the judge sees the steps NAT showed its judge, in order
        if case["id"] in asked:
            shown = asked[case["id"]].split("[TRAJECTORY]\n", 1)[1].split("\n[END_TRAJECTORY]", 1)[0]
            expected = [
                f"Step {n}\nName: {tool}\nInput: {tool_input}\nOutput: {'' if output is None else output}"
                for n, (tool, tool_input, output) in enumerate(case["nat"]["steps"], 1)
            ]
            assert shown == ("\n\n".join(expected) or "(no steps)"), case["id"]


async def test_trajectory_default_is_honest_where_nat_is_not() -> None:
    """The same rows by default: (N-1)/4 where the reply has a 1..5 grade, NaN and the reason
    otherwise, and every row's steps shown to the judge."""
    result, judge = await run_nat_cases()
    scores = result.column("trajectory")
    differ = 0
    for i, case in enumerate(NAT_CASES):
        reply = case["judge_reply"]
        grade = None if reply is None else parsed_grade(reply)
        if not isinstance(case["generated_answer"], str):  # NAT takes str(42); the default refuses
            assert result.errors[i].field == "generated_answer"
        elif grade is None:
            assert math.isnan(scores[i]), case["id"]
            assert result.errors[i].field == ("judge" if reply is None else "judge_reply")
        else:
            assert scores[i] == grade, case["id"]
        differ += not scores[i] == case["nat"]["score"]
    assert len(judge.requests) == len(NAT_CASES) - 1
    # 11 rows with steps NAT refuses (0.0 there), 18 unreadable replies (NAT: a raw number or 0.0),
    # the failed judge (NAT: 0.0) and the numeric answer (NAT: str(42))
    assert differ == 31


@pytest.mark.parametrize(
    ("reply", "nat"),
    [
        ("Score: 4", 0.75),
        ("Score: 3.5", 3.5),
        ("Score: 10", 10.0),
        ("I'd give it a score of 4.", 4.0),
        ("SCORE: 2", 2.0),
        ("Score: 4.5\nFinal score: 2", 2.0),
        ("Score:4", 0.0),  # LangChain's split fails without quoting the reply
        ("The agent did well.", 0.0),
        ("Score: 2 ... later Score: 5", 0.25),
    ],
)
def test_nat_reading_of_a_reply(reply: str, nat: float) -> None:
    assert nat_score(reply) == nat


def test_nat_compat_and_unparseable_as_zero_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="choose one"):
        TrajectoryEvaluation.Config.model_validate({"url": "http://a/v1", "model": "m", "nat_compat": True, "unparseable_as_zero": True})


def test_nat_average_score_rounds_the_mean_and_skips_nan() -> None:
    assert nat_average_score([0.75, 3.5, 0.0]) == 1.42
    assert nat_average_score([1.0, float("nan")]) == 1.0
    assert nat_average_score([]) is None
