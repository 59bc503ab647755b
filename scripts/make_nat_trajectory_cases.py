"""Write NeMo Agent Toolkit 1.9.0 trajectory-evaluator conformance cases (tests/data/trajectory/).

A tool for producing test data, not part of gym-metrics: it runs NAT's own
`TrajectoryEvaluator` (`nvidia-nat-langchain`, `nat/plugins/langchain/eval/trajectory_evaluator.py`),
which is NOT a project dependency. Use a throwaway interpreter:

    python3 -m venv /tmp/nat && /tmp/nat/bin/pip install nvidia-nat-langchain==1.9.0
    /tmp/nat/bin/python scripts/make_nat_trajectory_cases.py            # writes the files below
    /tmp/nat/bin/python scripts/make_nat_trajectory_cases.py --check    # compares, writes nothing

The judge is a scripted LangChain chat model: each case's question carries a `[[case:ID]]`
marker and the model answers that case's `judge_reply` (or raises, for a judge that fails).
Every case is one `EvalInputItem` (question, generated answer, the steps validated as NAT
`IntermediateStep`s) and all of them go through one `TrajectoryEvaluator.evaluate` call, as
`nat eval` does. Written:

- `cases.jsonl`: per case the row gym-metrics reads (`question`, `generated_answer`,
  `intermediate_steps`), the scripted reply, and what NAT gave: `score`, whether the judge was
  asked (`judge_called`) and the trajectory it showed the judge (`steps`: tool, input, output);
- `nat_average.json`: NAT's `average_score` over all the cases.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests/data/trajectory"
Row = dict[str, Any]

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)  # NAT logs every parser failure with a traceback


def step(event: str, name: str | None, data: Any = "absent", **payload: Any) -> Row:
    """One NAT IntermediateStep as a workflow's output JSON holds it."""
    body: Row = {"event_type": event, "name": name, **payload}
    if data != "absent":
        body["data"] = data
    return {
        "parent_id": "root",
        "function_ancestry": {"function_id": "f-1", "function_name": "react_agent"},
        "payload": body,
    }


def io(input_: Any, output: Any) -> Row:
    return {"input": input_, "output": output}


BASIC = [
    step("WORKFLOW_START", "react_agent", io("q", None)),
    step("LLM_START", "llama-3", io("plan", None)),
    step("LLM_END", "llama-3", io("plan", "I should search.")),
    step("TOOL_START", "web_search", io({"q": "Eiffel Tower country"}, None)),
    step("TOOL_END", "web_search", io({"q": "Eiffel Tower country"}, "France")),
    step("FUNCTION_END", "wrapper", io("x", "y")),
    step("LLM_END", "llama-3", io("next", "Look up the capital.")),
    step("TOOL_END", "capital_lookup", io("France", "Paris")),
    step("WORKFLOW_END", "react_agent", io("q", "Paris")),
]

# Trajectories that change which steps NAT keeps, or that its AgentAction model refuses.
STEP_CASES: dict[str, list[Row]] = {
    "basic": BASIC,
    "no_steps": [],
    "nothing_kept": [step("LLM_START", "m", io("p", None)), step("WORKFLOW_END", "w", io("q", "a"))],
    "tool_only": [step("TOOL_END", "calc", io("2+2", "4"))],
    "tool_input_null": [step("LLM_END", "m", io("p", "call calc")), step("TOOL_END", "calc", io(None, "4"))],
    "tool_input_list": [step("TOOL_END", "calc", io([2, 2], "4"))],
    "tool_input_number": [step("TOOL_END", "calc", io(4, "4"))],
    "tool_input_float": [step("TOOL_END", "calc", io(2.5, "x"))],
    "tool_input_bool": [step("TOOL_END", "calc", io(True, "x"))],
    "tool_input_empty_string": [step("TOOL_END", "calc", io("", "x"))],
    "tool_input_nested_object": [step("TOOL_END", "search", io({"q": "x", "opts": {"k": [1, 2]}}, "r"))],
    "tool_data_null": [step("TOOL_END", "calc", None)],
    "tool_data_missing": [step("TOOL_END", "calc")],
    "tool_data_empty": [step("TOOL_END", "calc", {})],
    "tool_output_object": [step("TOOL_END", "search", io("x", {"hits": [1, 2]}))],
    "tool_output_null": [step("TOOL_END", "search", io("x", None))],
    "tool_name_null": [step("TOOL_END", None, io("x", "y"))],
    "llm_input_null": [step("LLM_END", "m", io(None, "thinking"))],
    "llm_input_messages": [step("LLM_END", "m", io([{"role": "user", "content": "hi"}], "hello"))],
    "llm_output_null_last": [step("TOOL_END", "calc", io("1", "1")), step("LLM_END", "m", io("p", None))],
    "llm_output_null_then_tool": [step("LLM_END", "m", io("p", None)), step("TOOL_END", "calc", io("x", "y"))],
    "llm_output_object_then_tool": [step("LLM_END", "m", io("p", {"text": "t"})), step("TOOL_END", "calc", io("x", "y"))],
    "llm_data_null_then_tool": [step("LLM_END", "m", None), step("TOOL_END", "calc", io("x", "y"))],
    "llm_output_object_last": [step("LLM_END", "m", io("p", {"text": "t"}))],
    "bad_input_in_dropped_step": [step("TOOL_START", "calc", io(None, None)), step("LLM_START", "m", io([1], None)),
                                  step("TOOL_END", "calc", io("x", "y"))],
    "bad_input_after_good_steps": BASIC[:5] + [step("TOOL_END", "calc", io(7, "y"))],
}

# Replies NAT reads in each of its ways (LangChain's parser, then its own recovery).
REPLY_CASES: dict[str, str] = {
    "grade_5": "The answer is right and the tools were well used.\n\nScore: 5",
    "grade_1": "Score: 1",
    "grade_3": "Reasonable.\nScore: 3",
    "grade_out_of_5": "ok\nScore: 3/5",
    "grade_bold": "Score: **4**",
    "grade_negative_sign": "Score: -3",
    "grade_later_words": "Score: excellent, score 4 overall",
    "grade_blank_lines": "Score: \n\n4",
    "two_grades_first_counts": "Score: 2 ... later Score: 5",
    "half_point": "Score: 3.5",
    "point_zero": "Score: 5.0",
    "ten": "Score: 10",
    "seven": "Fine work. Score: 7",
    "zero": "Score: 0",
    "decimal_out_of_range": "Score: 12.75",
    "float_then_final": "Score: 4.5\nFinal score: 2",
    "earlier_mention_then_bad": "My first score of 2 was too low. Score: 9",
    "no_space_after_colon": "Score:4",
    "newline_after_colon": "Score:\n4",
    "no_score": "The agent did well.",
    "score_of_words": "I would give it a score of 4.",
    "upper_case": "SCORE: 2",
    "lower_case": "score: 4",
    "word_not_number": "Score: excellent",
    "empty_reply": "",
    "underscore_word": "This is an underscore 3 example with no grade",
    "score_without_colon_last": "score 1 at first, final score 4",
}

JUDGE_FAILS = "judge_http_error"


def cases() -> list[Row]:
    out = []
    for id_, steps in STEP_CASES.items():
        out.append({"id": f"steps_{id_}", "steps": steps, "reply": "Mostly fine.\nScore: 4"})
    for id_, reply in REPLY_CASES.items():
        out.append({"id": f"reply_{id_}", "steps": BASIC, "reply": reply})
    out.append({"id": JUDGE_FAILS, "steps": BASIC, "reply": None})
    for c in out:
        c["question"] = f"[[case:{c['id']}]] What is the capital of the country where the Eiffel Tower is?"
        c["generated_answer"] = "Paris"
    out.append({  # NAT turns a non-string answer into text: str(42)
        "id": "answer_number", "steps": STEP_CASES["tool_only"], "reply": "Score: 2",
        "question": "[[case:answer_number]] 6 times 7?", "generated_answer": 42,
    })
    return out


def run_nat(all_cases: list[Row]) -> tuple[list[Row], float]:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from nat.data_models.evaluator import EvalInput, EvalInputItem
    from nat.data_models.intermediate_step import IntermediateStep
    from nat.plugins.langchain.eval.trajectory_evaluator import TrajectoryEvaluator

    replies = {c["id"]: c["reply"] for c in all_cases}
    asked: dict[str, int] = {}

    class ScriptedJudge(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            text = "\n".join(str(m.content) for m in messages)
            key = re.search(r"\[\[case:(\w+)\]\]", text).group(1)  # type: ignore[union-attr]
            asked[key] = asked.get(key, 0) + 1
            if replies[key] is None:
                raise RuntimeError("Error code: 503 - judge unavailable")
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=replies[key]))])

    items = [
        EvalInputItem(
            id=c["id"],
            input_obj=c["question"],
            expected_output_obj=None,
            output_obj=c["generated_answer"],
            trajectory=[IntermediateStep.model_validate(s) for s in c["steps"]],
            full_dataset_entry={},
        )
        for c in all_cases
    ]
    evaluator = TrajectoryEvaluator(llm=ScriptedJudge(), tools=None, max_concurrency=4)
    output = asyncio.run(evaluator.evaluate(EvalInput(eval_input_items=items)))
    results = []
    for c, item in zip(all_cases, output.eval_output_items):
        assert item.id == c["id"]
        reasoning = item.reasoning if isinstance(item.reasoning, dict) else {}
        trajectory = reasoning.get("trajectory")  # absent when NAT refused the steps before judging
        steps = None if trajectory is None else [[a["tool"], a["tool_input"], out] for a, out in trajectory]
        results.append({"score": item.score, "judge_called": c["id"] in asked, "steps": steps})
        assert asked.get(c["id"], 0) <= 1
    return results, output.average_score


def lines() -> tuple[list[Row], Row]:
    all_cases = cases()
    results, average = run_nat(all_cases)
    out = []
    for c, nat in zip(all_cases, results):
        out.append({
            "id": c["id"],
            "question": c["question"],
            "generated_answer": c["generated_answer"],
            "intermediate_steps": c["steps"],
            "judge_reply": c["reply"],
            "nat": nat,
        })
    return out, {"average_score": average, "items": len(out)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the files in tests/data; write nothing")
    args = parser.parse_args()
    rows, average = lines()
    files = {
        OUT / "cases.jsonl": "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
        OUT / "nat_average.json": json.dumps(average, indent=1) + "\n",
    }
    ok = True
    for path, text in files.items():
        if args.check:
            same = path.exists() and path.read_text(encoding="utf-8") == text
            ok &= same
            print(f"{'same' if same else 'DIFFERENT'}: {path}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
