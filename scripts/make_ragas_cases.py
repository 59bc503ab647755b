"""Write RAGAS 0.4.3 conformance cases for tool_call_accuracy's row checks and topic_adherence.

A tool for producing test data, not part of gym-metrics: it runs RAGAS's own code, which is
NOT a project dependency. Use a throwaway interpreter:

    python3 -m venv /tmp/ragas && /tmp/ragas/bin/pip install ragas==0.4.3 "langchain-community<0.4"
    /tmp/ragas/bin/python scripts/make_ragas_cases.py            # writes both files below
    /tmp/ragas/bin/python scripts/make_ragas_cases.py --check    # compares, writes nothing

(ragas 0.4.3 imports `langchain_community.chat_models.vertexai`, gone from
langchain-community 0.4, hence the pin.)

- `tests/data/tool_call_accuracy/validation.jsonl`: rows built to hit every check of RAGAS's
  `MultiTurnSample` (its pydantic field types, the message models of `ragas/messages.py`, and
  the `validate_user_input` order rules) and `ToolCallAccuracy`'s own assertion. Each line
  holds the row, what RAGAS did with it (`{"score": x}`, or `{"rejected": "<first error>"}`),
  the field gym-metrics must name when it rejects it, and for a row RAGAS accepts but
  gym-metrics refuses on purpose, `difference` (the README lists it).
- `tests/data/topic_adherence/cases.jsonl`: conversations, the judge's answers (topics, a
  refusal verdict per topic, the classification list, sometimes shorter or longer than the
  topics) and the three scores RAGAS's `TopicAdherenceScore` gave (modes f1, precision,
  recall), with the judge played by a scripted chat-completions server on 127.0.0.1 that
  RAGAS reaches through `langchain_openai.ChatOpenAI`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import warnings
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore", category=DeprecationWarning)  # ragas.metrics' old import paths

ROOT = Path(__file__).resolve().parent.parent
VALIDATION = ROOT / "tests/data/tool_call_accuracy/validation.jsonl"
TOPICS = ROOT / "tests/data/topic_adherence/cases.jsonl"

Row = dict[str, Any]


def human(text: str = "hi", **extra: Any) -> Row:
    return {"type": "human", "content": text, **extra}


def ai(*calls: tuple[str, Any], content: str = "", **extra: Any) -> Row:
    message: Row = {"type": "ai", "content": content, **extra}
    if calls:
        message["tool_calls"] = [{"name": n, "args": a} for n, a in calls]
    return message


def tool(text: str = "ok", **extra: Any) -> Row:
    return {"type": "tool", "content": text, **extra}


W = ("get_weather", {"city": "Paris"})
S = ("search", {"q": "nvidia"})
REF = [{"name": "get_weather", "args": {"city": "Paris"}}]


def validation_cases() -> list[Row]:
    """Rows, each with the field gym-metrics names when it rejects it (None: it scores it)."""
    out: list[Row] = []

    def case(
        id_: str, user_input: Any, ref_calls: Any = REF, field: str | None = None, difference: str = "", **extra: Any
    ) -> None:
        row: Row = {"reference_tool_calls": ref_calls, **extra}
        if user_input is not _ABSENT:
            row = {"user_input": user_input, **row}
        out.append({"id": id_, "row": row, "field": field, "difference": difference})

    # --- the order rules of MultiTurnSample.validate_user_input
    case("tool_first", [tool(), human(), ai(W)], field="user_input[0]")
    case("tool_after_human_only", [human(), tool(), ai(W)], field="user_input[1]")
    case("tool_after_ai_without_calls", [human(), ai(content="let me see"), tool(), ai(W)], field="user_input[2]")
    case("tool_after_ai_with_empty_calls", [human(), ai(W), tool(), ai(content="", tool_calls=[]), tool()], field="user_input[4]")
    case("tool_after_ai_with_null_calls", [human(), ai(content="x", tool_calls=None), tool(), ai(W)], field="user_input[2]")
    case("tool_after_human_later", [human(), ai(W), tool(), human("more"), tool()], field="user_input[4]")
    case("tool_after_human_ai_before", [ai(W), human(), tool()], field="user_input[2]")
    case("tool_after_tool_after_human", [human(), ai(W), tool(), human(), tool(), tool()], field="user_input[4]")
    case("tool_after_ai_that_called_earlier", [human(), ai(W), tool(), ai(content="thinking"), tool()], field="user_input[4]")
    case("tool_only", [tool()], [], field="user_input[0]")
    # accepted orders
    case("tool_after_ai_with_calls", [human(), ai(W), tool()])
    case("tools_in_a_row", [human(), ai(W, S), tool(), tool(), tool()], REF + [{"name": "search", "args": {"q": "nvidia"}}])
    case("tool_chain_two_turns", [human(), ai(W), tool(), ai(S), tool(), ai(content="done")], REF)
    case("ai_first", [ai(W), tool(), human("thanks"), ai(content="bye")])
    case("no_tool_messages", [human(), ai(W), ai(S)], REF)
    case("empty_conversation", [], [])
    case("empty_conversation_with_reference", [], REF)
    case("human_only", [human()], [])
    case("ai_null_calls_no_tool", [human(), ai(content="x", tool_calls=None)], [])
    case("ai_empty_calls_no_tool", [human(), ai(content="x", tool_calls=[])], [])
    # --- message fields (ragas/messages.py)
    case("type_system", [human(), {"type": "system", "content": "x"}], field="user_input[1].type")
    case("type_assistant", [human(), {"type": "assistant", "content": "x"}], field="user_input[1].type")
    case("type_user", [{"type": "user", "content": "x"}], field="user_input[0].type")
    case("type_null", [{"type": None, "content": "x"}], field="user_input[0].type")
    case("type_number", [{"type": 1, "content": "x"}], field="user_input[0].type")
    case("content_null", [human(), ai(W, content=None)], field="user_input[1].content")
    case("content_missing", [{"type": "human"}], field="user_input[0].content")
    case("content_number", [{"type": "human", "content": 5}], field="user_input[0].content")
    case("content_list", [{"type": "human", "content": [{"type": "text", "text": "hi"}]}], field="user_input[0].content")
    case("tool_content_null", [human(), ai(W), {"type": "tool", "content": None}], field="user_input[2].content")
    case("metadata_string", [human(metadata="x"), ai(W)], field="user_input[0].metadata")
    case("metadata_list", [human(), ai(W, metadata=[1])], field="user_input[1].metadata")
    case("metadata_object", [human(metadata={"lang": "en"}), ai(W, metadata={"id": 3}), tool(metadata={})])
    case("metadata_null", [human(metadata=None), ai(W, metadata=None)])
    case("message_string", [human(), "AI: hello"], field="user_input[1]")
    case("message_number", [3], [], field="user_input[0]")
    case("message_null", [human(), None], [], field="user_input[1]")
    case("extra_keys_ignored", [human(id="m1"), ai(W, id="m2", name="bot"), tool(tool_call_id="c1")])
    case("tool_calls_on_human_ignored", [human(tool_calls="junk"), ai(W)])
    case("tool_calls_on_tool_ignored", [human(), ai(W), tool(tool_calls=[1])])
    # --- an ai message's tool_calls (ToolCall: name str, args Dict[str, Any])
    case("tool_calls_object", [human(), ai(content="", tool_calls={"name": "f", "args": {}})], field="user_input[1].tool_calls")
    case("tool_calls_string", [human(), ai(content="", tool_calls="get_weather")], field="user_input[1].tool_calls")
    case("tool_call_string", [human(), ai(content="", tool_calls=["get_weather"])], field="user_input[1].tool_calls[0]")
    case("tool_call_name_missing", [human(), ai(content="", tool_calls=[{"args": {}}])], field="user_input[1].tool_calls[0].name")
    case("tool_call_name_digits", [human(), ai(("1", {}), ("f", {}), content="")], [{"name": "1", "args": {}}])
    case("tool_call_name_int", [human(), ai(content="", tool_calls=[{"name": 7, "args": {}}])], field="user_input[1].tool_calls[0].name")
    case("tool_call_name_null", [human(), ai(content="", tool_calls=[{"name": None, "args": {}}])], field="user_input[1].tool_calls[0].name")
    case("args_missing", [human(), ai(content="", tool_calls=[{"name": "f"}])], field="user_input[1].tool_calls[0].args")
    case("args_json_string", [human(), ai(("get_weather", '{"city": "Paris"}'))], field="user_input[1].tool_calls[0].args")
    case("args_null", [human(), ai(("get_weather", None))], field="user_input[1].tool_calls[0].args")
    case("args_list", [human(), ai(("get_weather", ["Paris"]))], field="user_input[1].tool_calls[0].args")
    case("call_extra_keys", [human(), ai(content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "function"}])])
    case("args_nested", [human(), ai(("get_weather", {"city": "Paris", "opts": {"units": ["C"]}}))])
    # --- reference_tool_calls (Optional[List[ToolCall]], then ToolCallAccuracy asserts it is set)
    case("reference_null", [human(), ai(W)], None, field="reference_tool_calls")
    case("reference_missing", [human(), ai(W)], _ABSENT_REF, field="reference_tool_calls")
    case("reference_string", [human(), ai(W)], json.dumps(REF), field="reference_tool_calls")
    case("reference_object", [human(), ai(W)], REF[0], field="reference_tool_calls")
    case("reference_args_string", [human(), ai(W)], [{"name": "get_weather", "args": '{"city": "Paris"}'}], field="reference_tool_calls[0].args")
    case("reference_name_missing", [human(), ai(W)], [{"args": {"city": "Paris"}}], field="reference_tool_calls[0].name")
    case("reference_call_number", [human(), ai(W)], [5], field="reference_tool_calls[0]")
    # --- user_input itself
    case("user_input_string", "Human: hi", [], field="user_input")
    case("user_input_null", None, [], field="user_input")
    case("user_input_missing", _ABSENT, [], field="user_input")
    case("user_input_object", {"type": "human", "content": "hi"}, [], field="user_input")
    # --- the other fields MultiTurnSample types (it is built from the whole row)
    case("reference_text", [human(), ai(W)], reference="It is sunny.")
    case("reference_text_null", [human(), ai(W)], reference=None)
    case("reference_number", [human(), ai(W)], reference=5, field="reference")
    case("reference_list", [human(), ai(W)], reference=["a"], field="reference")
    case("rubrics_ok", [human(), ai(W)], rubrics={"score1": "bad", "score5": "good"})
    case("rubrics_list", [human(), ai(W)], rubrics=["bad", "good"], field="rubrics")
    case("rubrics_number_value", [human(), ai(W)], rubrics={"score1": 1}, field="rubrics.score1")
    case("reference_topics_ok", [human(), ai(W)], reference_topics=["weather"])
    case("reference_topics_string", [human(), ai(W)], reference_topics="weather", field="reference_topics")
    case("reference_topics_number_item", [human(), ai(W)], reference_topics=["weather", 3], field="reference_topics[1]")
    case("unrelated_fields_ignored", [human(), ai(W)], id=7, response={"x": 1}, retrieved_contexts=5)
    # --- accepted by RAGAS, refused by gym-metrics on purpose
    case(
        "type_missing_guessed",
        [{"content": "hi"}, {"content": "", "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]}],
        field="user_input[0].type",
        difference="a message without `type`: RAGAS's pydantic union guesses (HumanMessage, or AIMessage when it carries tool_calls)",
    )
    for c in out:  # the sentinel for "leave the key out"
        if c["row"].get("reference_tool_calls") is _ABSENT_REF:
            del c["row"]["reference_tool_calls"]
    return out


_ABSENT = object()
_ABSENT_REF = object()


def ragas_verdict(row: Row) -> Row:
    """What RAGAS 0.4.3 does with the row: builds `MultiTurnSample(**row)` (as `ToolCallAccuracy
    ._ascore` and `EvaluationDataset.from_list` do), then scores it."""
    import pydantic
    from ragas.dataset_schema import MultiTurnSample
    from ragas.metrics import ToolCallAccuracy

    try:
        sample = MultiTurnSample(**row)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        return {"rejected": f"{'.'.join(map(str, first['loc']))}: {first['msg']}"}
    out: Row = {}
    for key, strict in (("score", True), ("score_unordered", False)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[key] = asyncio.run(ToolCallAccuracy(strict_order=strict)._multi_turn_ascore(sample, None))
        except AssertionError as exc:
            return {"rejected": f"AssertionError: {exc}"}
    return out


def validation_lines() -> list[Row]:
    lines = []
    for c in validation_cases():
        verdict = ragas_verdict(c["row"])
        line: Row = {"id": c["id"], "row": c["row"], "ragas": verdict}
        rejected = "rejected" in verdict
        if c.get("difference"):
            assert not rejected, c["id"]
            line["difference"] = c["difference"]
        elif rejected != (c["field"] is not None):
            raise SystemExit(f"{c['id']}: RAGAS says {verdict}, the case expects field {c['field']!r}")
        if c["field"] is not None:
            line["field"] = c["field"]
        lines.append(line)
    return lines


# ----------------------------------------------------------------------------- topic adherence

CONVERSATION = [
    human("What's the weather in Lyon today?"),
    ai(("weather", {"city": "Lyon"})),
    tool("21C, sunny"),
    ai(content="It is 21C and sunny in Lyon."),
    human("Thanks. Could you also write me a poem about cats, and tell me which stock to buy?"),
    ai(content="Here is a short poem: cats sleep in sunny spots. I can't give investment advice."),
]
REFERENCE_TOPICS = ["Weather", "Travel", "Finance"]


def topic_scenarios() -> list[Row]:
    """The judge's answers per case: topics, refused per topic, the classification list."""
    t3 = ["weather in Lyon", "poem about cats", "stock to buy"]
    t6 = t3 + ["train to Paris", "museum hours", "tax advice"]
    refused3 = [False, False, True]
    refused6 = [False, False, True, False, True, True]
    return [
        {"id": "exact_length", "topics": t3, "refused": refused3, "classifications": [True, False, True]},
        {"id": "all_answered_on_topic", "topics": t3[:1], "refused": [False], "classifications": [True]},
        {"id": "short_by_one", "topics": t3, "refused": refused3, "classifications": [True, False]},
        {"id": "short_by_two", "topics": t3, "refused": refused3, "classifications": [True]},
        {"id": "empty_list", "topics": t3, "refused": refused3, "classifications": []},
        {"id": "long_by_one", "topics": t3, "refused": refused3, "classifications": [True, False, True, True]},
        {"id": "long_by_three", "topics": t3, "refused": refused3, "classifications": [False, True, True, True, True, True]},
        {"id": "six_short", "topics": t6, "refused": refused6, "classifications": [True, True, True, True]},
        {"id": "six_long", "topics": t6, "refused": refused6, "classifications": [True, False, True, True, True, False, True, True]},
        {"id": "six_exact", "topics": t6, "refused": refused6, "classifications": [True, False, True, True, True, False]},
        {"id": "all_refused_short", "topics": t3, "refused": [True, True, True], "classifications": [True]},
        {"id": "words_for_booleans", "topics": t3, "refused": refused3, "classifications": ["yes", "no"]},
        {"id": "no_topics", "topics": [], "refused": [], "classifications": []},
        {"id": "no_topics_stray_verdicts", "topics": [], "refused": [], "classifications": [True, False]},
    ]


def topic_lines() -> list[Row]:
    from gym_metrics.testing import ScriptedJudge  # stdlib only
    from langchain_openai import ChatOpenAI
    from ragas.dataset_schema import MultiTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import TopicAdherenceScore

    lines = []
    for scenario in topic_scenarios():
        refused = dict(zip(scenario["topics"], scenario["refused"]))

        def respond(body: Row, scenario: Row = scenario, refused: Row = refused) -> str:
            prompt = body["messages"][-1]["content"]
            data = json.loads(prompt.rsplit("\ninput: ", 1)[1].rsplit("\nOutput: ", 1)[0])
            if "topic" in data:
                return json.dumps({"refused_to_answer": refused[data["topic"]]})
            if "reference_topics" in data:
                return json.dumps({"classifications": scenario["classifications"]})
            return json.dumps({"topics": scenario["topics"]})

        scores: Row = {}
        with ScriptedJudge([respond] * 100) as judge:
            llm = LangchainLLMWrapper(ChatOpenAI(base_url=judge.url, api_key="unused", model="scripted", max_retries=0))
            sample = MultiTurnSample(user_input=CONVERSATION, reference_topics=REFERENCE_TOPICS)

            async def all_modes() -> None:  # one event loop: the client's connections live in it
                for mode in ("f1", "precision", "recall"):
                    metric = TopicAdherenceScore(llm=llm, mode=mode)
                    scores[mode] = float(await metric._multi_turn_ascore(sample, None))

            asyncio.run(all_modes())
            calls = len(judge.requests)
        judge_answers = {k: scenario[k] for k in ("topics", "refused", "classifications")}
        lines.append(
            {
                "id": scenario["id"],
                "user_input": CONVERSATION,
                "reference_topics": REFERENCE_TOPICS,
                "judge": judge_answers,
                "ragas": {f"topic_adherence_{k}": v for k, v in scores.items()},
                "ragas_judge_calls_per_mode": calls // 3,
            }
        )
    return lines


def emit(path: Path, lines: list[Row], check: bool) -> bool:
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    if check:
        same = path.exists() and path.read_text(encoding="utf-8") == text
        print(f"{'same' if same else 'DIFFERENT'}: {path}")
        return same
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path} ({len(lines)} cases)")
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the files in tests/data; write nothing")
    parser.add_argument("--only", choices=["validation", "topic_adherence"])
    args = parser.parse_args()
    ok = True
    if args.only in (None, "validation"):
        ok &= emit(VALIDATION, validation_lines(), args.check)
    if args.only in (None, "topic_adherence"):
        ok &= emit(TOPICS, topic_lines(), args.check)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
