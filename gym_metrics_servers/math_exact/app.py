"""math_exact: exact-answer math verification, in the spirit of NeMo Gym's math environment.

`verify` extracts the model's final answer (last `\\boxed{...}`, else the last "answer is X" /
"Answer: X", else the last number) and compares it with `expected_answer` after a small,
deterministic normalisation (numbers compared exactly as fractions, text case-insensitively).
No sympy, no LLM judge: the same text always gets the same reward.

`compute_metrics_columns` adds first-k pass@k and the mean-of-rewards pass@1 per agent and per
task, computed by the framework's reward reducers (`pass@{k}`, `mean_reward`) from the reward
column (no row dicts; `compute_metrics` gives the same from rows, for NeMo Gym callers);
`get_key_metrics` picks the headline numbers.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, field_validator, model_validator

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, MetricColumns, SimpleResourcesServer, register_server
from gym_metrics.reducers import PASS_THRESHOLD, TaskRewards, get_reducer

SAMPLE_PATH = Path(__file__).with_name("sample.jsonl")
"""The shipped sample: 12 tasks x 4 repeats x 3 agents of unverified rollouts."""

AVG_OF_K = "pass@1[avg-of-k]"
"""Mean over tasks of each task's mean reward (what NeMo Gym reports as pass@1 averaged over k)."""


# ----------------------------------------------------------------------------- models


class MathVerifyRequest(BaseVerifyRequest):
    """One math rollout: the model's response and the reference answer."""

    response: dict[str, Any] = Field(default_factory=dict)
    """The model's response; or give `model_output` (one of them: a row with neither is a
    task nobody answered, an invalid request rather than a 0)."""
    expected_answer: str
    """The reference answer, e.g. "42", "1/2", "0.5", "\\frac{3}{4}" or "Paris"."""
    model_output: str | None = None
    """Plain-text model output, used when `response` holds no output text (a convenience for
    callers without Responses API objects)."""

    @field_validator("expected_answer", mode="before")
    @classmethod
    def _number_to_str(cls, value: Any) -> Any:
        # Datasets often store numeric answers as JSON numbers; accept them as their text.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return value


    @model_validator(mode="after")
    def _answered(self) -> MathVerifyRequest:
        if "response" not in self.model_fields_set and self.model_output is None:
            raise ValueError("no answer to verify: give `response` (or `model_output`); collect generates one with --policy-url")
        return self


class MathVerifyResponse(BaseVerifyResponse):
    """The verdict: reward 1.0 iff the extracted answer equals the expected one."""

    extracted_answer: str | None = None
    """The answer found in the model output (before normalisation); None when none was found."""
    is_correct: bool = False
    """True iff the extracted answer matches `expected_answer`."""
    expected_answer: str = Field(default="")
    """The reference answer, echoed back."""


# ----------------------------------------------------------------------------- extraction

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_IS = re.compile(
    r"\banswer\s*(?:is|:)[\s:*]*(?P<ans>.+?)[\s*]*(?:\.(?=\s|$)|\n|$)",
    re.IGNORECASE,
)
_ANSWER_WORD = re.compile(r"answer", re.IGNORECASE)
"""Where an _ANSWER_IS match can first start: the full pattern, tried at every position of a
long text, was two thirds of a verify's CPU; scanning from here finds the same matches."""
# A number: optional sign (not a minus between operands, as in "5-3"), digits with optional
# thousands separators, optional decimals, optional "/denominator".
_NUMBER = re.compile(
    r"(?:(?<![\w)\]}])[-+])?"
    r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?"
    r"|(?:(?<![\w)\]}])-)?\.\d+"
)


def response_text(response: Any) -> str:
    """All assistant output text of an OpenAI Responses API response, joined by newlines."""
    if not isinstance(response, dict):
        return ""
    output = response.get("output")
    if not isinstance(output, list):
        return ""
    parts: list[str] = []
    for item in output:
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            continue  # reasoning, function calls, ...
        content = item.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for piece in content:
                if isinstance(piece, dict) and piece.get("type", "output_text") == "output_text":
                    text = piece.get("text")
                    if isinstance(text, str):
                        parts.append(text)
    return "\n".join(parts)


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` / `\\fbox{...}` with balanced braces (nested ok)."""
    found: str | None = None
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    found = text[start:i]
                    break
        # an unbalanced (truncated) box is ignored
    return found


def extract_answer(text: str | None) -> str | None:
    """The final answer in `text`, or None.

    Order: the last balanced `\\boxed{...}`; else the last "answer is X" / "Answer: X" (up to
    the end of the line or sentence); else the last number.
    """
    if not text:
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    first = _ANSWER_WORD.search(text)
    answers = [] if first is None else [m.group("ans").strip() for m in _ANSWER_IS.finditer(text, first.start())]
    answers = [a for a in answers if a]
    if answers:
        return answers[-1]
    numbers = _NUMBER.findall(text)
    return numbers[-1].strip() if numbers else None


# ----------------------------------------------------------------------------- normalisation

_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|boxed)\s*\{")
_LATEX_SPACES = re.compile(r"\\[,!;: ]|\\quad|\\qquad|~")
_ASSIGNMENT = re.compile(r"^[A-Za-z]\s*=\s*(?P<rhs>.+)$", re.DOTALL)
_DEGREE = re.compile(r"\^\s*\{?\\circ\}?$")
_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?P<sep>[, ])\d{3}(?:(?P=sep)\d{3})*(?:\.\d+)?")
_SLASH_FRACTION = re.compile(r"(?P<num>[^/]+)/(?P<den>[^/]+)")
_LATEX_FRACTION = re.compile(r"(?P<sign>[-+]?)\s*\\[dt]?frac\s*\{(?P<num>[^{}]+)\}\s*\{(?P<den>[^{}]+)\}")


def _unwrap(s: str) -> str:
    """`\\text{X}` (or `\\mathrm`, `\\boxed`, ...) around the whole string -> X; else s."""
    match = _WRAPPER.match(s)
    if not match or not s.endswith("}"):
        return s
    inner = s[match.end() : -1]
    depth = 0
    for ch in inner:  # the closing brace must be the wrapper's own: "\text{a} \text{b}" stays
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            return s
    return inner if depth == 0 else s


@functools.lru_cache(maxsize=1 << 16)  # pure, and answers repeat (k rollouts share an expected answer)
def normalize(answer: str) -> str:
    """Canonical text form of an answer: the string the comparison starts from.

    Strips whitespace, `$` and `\\(...\\)` delimiters, trailing periods, a surrounding
    `\\text{}` (also `\\textbf`, `\\mathrm`, `\\mbox`, `\\boxed`, ...), LaTeX spacing commands,
    a single-letter assignment (`x = 6` -> `6`), a trailing `%` / `\\%` or degree sign, and
    collapses inner whitespace.
    """
    s = answer.strip()
    previous = None
    while s != previous:  # peel layers until nothing changes: "$\text{ 42 }$." -> "42"
        previous = s
        s = s.replace("$", "").strip()
        s = s.removeprefix("\\(").removesuffix("\\)").removeprefix("\\[").removesuffix("\\]").strip()
        s = s.rstrip(".").strip()
        s = _unwrap(s).strip()
    s = _LATEX_SPACES.sub("", s).replace("{,}", ",")
    assignment = _ASSIGNMENT.match(s)
    if assignment:  # "x = 6" -> "6"
        s = assignment.group("rhs").strip()
    s = _DEGREE.sub("", s)
    s = s.removesuffix("\\%").removesuffix("%").strip()
    return " ".join(s.split())


def _plain_number(s: str) -> Fraction | None:
    s = s.strip()
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "").replace(" ", "")
    if _PLAIN_NUMBER.fullmatch(s):
        try:
            return Fraction(s)
        except ValueError:  # past Python's int-string limit (4,300 digits): compared as text instead
            return None
    return None


@functools.lru_cache(maxsize=1 << 16)
def to_number(answer: str) -> Fraction | None:
    """The exact value of a normalised answer when it is a number, else None.

    Accepts integers, decimals, thousands separators ("1,000" or "1 000"), `a/b` and
    `\\frac{a}{b}` (also `\\dfrac`, `\\tfrac`) with plain-number parts.
    """
    value = _plain_number(answer)
    if value is not None:
        return value
    latex = _LATEX_FRACTION.fullmatch(answer.strip())
    parts = latex or _SLASH_FRACTION.fullmatch(answer.strip())
    if parts is None:
        return None
    num, den = _plain_number(parts.group("num")), _plain_number(parts.group("den"))
    if num is None or den is None or den == 0:
        return None
    value = num / den
    return -value if latex and latex.group("sign") == "-" else value


def answers_match(extracted: str | None, expected: str) -> bool:
    """Exact comparison after normalisation: numerically when both parse, else case-insensitive."""
    if extracted is None:
        return False
    got, want = normalize(extracted), normalize(expected)
    got_num, want_num = to_number(got), to_number(want)
    if got_num is not None and want_num is not None:
        return got_num == want_num
    return got.casefold() == want.casefold() and want != ""


# ----------------------------------------------------------------------------- metrics

_PASS_AT = re.compile(r"pass@(\d+)")


def _position_values(rewards: np.ndarray) -> np.ndarray:
    """Rewards as first-k pass@k reads them: a missing (NaN) reward still takes its position and
    does not pass; +inf passes."""
    finite = np.isfinite(rewards)
    if finite.all():
        return rewards
    return np.where(finite, rewards, np.where(rewards == math.inf, 1.0, 0.0))


def _finite_only(rewards: np.ndarray, offsets: np.ndarray) -> TaskRewards:
    """Each task's finite rewards (a missing reward neither passes nor counts towards a mean)."""
    keep = np.isfinite(rewards)
    if keep.all():
        return TaskRewards(rewards, offsets)
    return TaskRewards(rewards[keep], np.concatenate(([0], np.cumsum(keep)))[offsets])


def _reduced(name: str, rewards: TaskRewards) -> tuple[float, np.ndarray]:
    """The named reducer's value over the tasks, and each task's own score (NaN where the task
    does not count, e.g. no reward for mean_reward)."""
    reducer = get_reducer(name)
    terms = reducer.task_terms(rewards)
    if terms is None:
        raise TypeError(f"reducer {name!r} has no per-task scores")
    numerator, weight = terms
    per_task = np.divide(numerator, weight, out=np.full(len(weight), np.nan), where=weight > 0)
    return float(reducer.compute(rewards)), per_task


_SLICE = 65_536
"""Tasks turned into Python values at a time: a whole column's `tolist()` over millions of tasks
would hold the GIL (and stall the server's event loop) for 100 ms and more."""


def _per_task_entries(task_index: np.ndarray, columns: dict[str, np.ndarray], means: np.ndarray) -> list[dict[str, Any]]:
    """One `per_task_metrics` entry per task: its pass@k values and its mean (where it has one)."""
    keys = list(columns)
    entries: list[dict[str, Any]] = []
    for lo in range(0, len(task_index), _SLICE):
        part = slice(lo, lo + _SLICE)
        values = zip(*(columns[k][part].tolist() for k in keys))
        for index, row, mean in zip(task_index[part].tolist(), values, means[part].tolist()):
            entry: dict[str, Any] = {"_ng_task_index": index}
            entry.update(zip(keys, row))
            if mean == mean:  # not NaN
                entry[AVG_OF_K] = mean
            entries.append(entry)
    return entries


def pass_at_k_values(num_samples: int) -> list[int]:
    """The k reported for tasks with up to `num_samples` samples: 1, 2, 4, ... and the max."""
    ks = [1 << i for i in range(num_samples.bit_length()) if (1 << i) <= num_samples]
    if num_samples >= 1 and ks[-1] != num_samples:
        ks.append(num_samples)
    return ks


@register_server("math_exact")
class MathExactServer(SimpleResourcesServer):
    """Exact-answer math: reward 1.0 iff the extracted final answer equals `expected_answer`."""

    name = "math_exact"
    sample = SAMPLE_PATH
    eager_verify = True  # pure CPU: no Task per rollout before Python 3.12

    async def verify(self, body: MathVerifyRequest) -> MathVerifyResponse:
        text = response_text(body.response) or body.model_output or ""
        extracted = extract_answer(text)
        correct = answers_match(extracted, body.expected_answer)
        return MathVerifyResponse(
            reward=1.0 if correct else 0.0,
            extracted_answer=extracted,
            is_correct=correct,
            expected_answer=body.expected_answer,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """compute_metrics_columns' answer from rows grouped by task (NeMo Gym's hook; the
        framework calls the columnar one)."""
        return self.compute_metrics_columns(MetricColumns.from_task_rows(tasks))

    def compute_metrics_columns(self, columns: MetricColumns) -> dict[str, Any]:
        """First-k pass@k and the mean-of-rewards pass@1, per agent and per task.

        - `pass@k`: fraction of tasks where any of the FIRST k samples (rollout order) passes
          (reward >= 1.0), for k = 1, 2, 4, ... up to the largest number of samples of any
          task, plus that largest number itself. A task with fewer than k samples counts with
          the samples it has (it is neither dropped nor scored as a pass).
        - `pass@1[avg-of-k]`: mean over tasks of each task's mean reward.
        Per task, the same keys (0/1 for pass@k) go into `per_task_metrics`.
        """
        max_n = int(columns.counts.max()) if len(columns.counts) else 0
        if max_n == 0:
            return {}
        rewards, offsets = columns.reward, columns.offsets
        # First-k reads positions: a missing reward is a sample that does not pass (+inf passes).
        samples = TaskRewards(_position_values(rewards), offsets)
        metrics: dict[str, Any] = {}
        per_task_cols: dict[str, np.ndarray] = {}
        for k in pass_at_k_values(max_n):
            metrics[f"pass@{k}"], per_task_cols[f"pass@{k}"] = _reduced(f"pass@{k}", samples)
        metrics[AVG_OF_K], means = _reduced("mean_reward", _finite_only(rewards, offsets))  # missing left out

        metrics["per_task_metrics"] = _per_task_entries(columns.task_index, per_task_cols, means)
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """`mean/reward`, `pass@1[avg-of-k]` and the largest first-k `pass@k` present."""
        key: dict[str, Any] = {name: agent_metrics[name] for name in ("mean/reward", AVG_OF_K) if name in agent_metrics}
        ks = [int(m.group(1)) for name in agent_metrics if (m := _PASS_AT.fullmatch(name))]
        if ks:
            largest = f"pass@{max(ks)}"
            key[largest] = agent_metrics[largest]
        return key


__all__ = [
    "AVG_OF_K",
    "PASS_THRESHOLD",
    "SAMPLE_PATH",
    "MathExactServer",
    "MathVerifyRequest",
    "MathVerifyResponse",
    "answers_match",
    "extract_answer",
    "normalize",
    "response_text",
    "to_number",
]
