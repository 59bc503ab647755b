"""One answer scored as reasoning-gym scores it: the answer taken from the model's text by
reasoning-gym's own `extract_answer` (the last `<answer>...</answer>`), and the reward exactly
what the dataset's `score_answer` gives for the row's entry, partial credit included.

The dataset object a score needs is rebuilt from the row's settings and kept (an LRU by name,
config, seed and size), so rows of one dataset build it once. A scorer that raises scores 0.0
with its error kept, as reasoning-gym's own evaluation does (eval/eval.py): the rollout is a
wrong answer, not a failed one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gym_metrics._util.deadline import DeadlineExceeded, cpu_deadline
from gym_metrics.ecosystems.reasoning_gym._library import library
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.ecosystems.reasoning_gym._rows import DatasetRef, create

MAX_DATASETS = 256
"""Dataset objects a Scoring keeps: a mix of every reasoning-gym dataset fits twice over."""


@dataclass(frozen=True)
class Score:
    """A scored answer: the reward, the answer found (None: no `<answer>` tag), and the
    scorer's error when it raised (then the reward is 0.0)."""

    reward: float
    answer: str | None
    error: str | None = None


SCORE_SECONDS = 5.0
"""One answer's scoring at most (reasoning-gym scores an answer in microseconds to milliseconds)."""
BUILD_SECONDS = 30.0
"""Building one dataset at most (a row may name any size: acre of 60,000 takes 12 s)."""


class Scoring:
    """Scores model outputs against rows' entries (module docstring)."""

    def __init__(self, max_datasets: int = MAX_DATASETS, where: str = "reasoning_gym") -> None:
        library()
        from reasoning_gym.utils import extract_answer

        self._extract = extract_answer
        self._datasets: OrderedDict[tuple[str, bytes, int, int], Any] = OrderedDict()
        self._max = max_datasets
        self._where = where

    def dataset(self, ref: DatasetRef) -> Any:
        """The dataset `ref` names, built once (InvalidInputError naming the field when it cannot be)."""
        key = ref.key()
        found = self._datasets.get(key)
        if found is not None:
            self._datasets.move_to_end(key)
            return found
        try:
            with cpu_deadline(BUILD_SECONDS):
                built = create(ref.dataset, ref.config, ref.seed, ref.size, name_field=f"{self._where}.dataset", config_field=f"{self._where}.config")
        except DeadlineExceeded:
            why = f"building {ref.dataset} of size {ref.size:,} took more than {BUILD_SECONDS:g} s: stopped"
            raise InvalidInputError("the dataset cannot be built in time", [FieldViolation(f"{self._where}.size", why)]) from None
        self._datasets[key] = built
        if len(self._datasets) > self._max:
            self._datasets.popitem(last=False)
        return built

    def extract(self, text: str) -> str | None:
        """The answer reasoning-gym reads in `text`: the last `<answer>...</answer>`, stripped."""
        return self._extract(text)

    def score(self, text: str, ref: DatasetRef, entry: Mapping[str, Any]) -> Score:
        """`text`'s answer scored by the dataset of `ref` against `entry`, within SCORE_SECONDS
        (a scorer that evaluates the answer, `9**9**9**9` in puzzle24 or polynomial_multiplication,
        ran forever and held the whole server: stopped, it scores 0 and says why)."""
        dataset = self.dataset(ref)
        answer = self.extract(text)
        try:
            with cpu_deadline(SCORE_SECONDS):
                reward = float(dataset.score_answer(answer=answer, entry=entry))
        except DeadlineExceeded:
            return Score(0.0, answer, f"scoring stopped after {SCORE_SECONDS:g} s (reasoning-gym's score_answer on this answer)")
        except Exception as exc:
            return Score(0.0, answer, f"{type(exc).__name__}: {exc}")
        return Score(reward, answer)


def response_text(response: Mapping[str, Any]) -> str:
    """A Responses API response's output text, as the openai SDK's `output_text` joins it: every
    `output_text` part of every `message` item, in order, with nothing between."""
    parts: list[str] = []
    for item in response.get("output") or ():
        if isinstance(item, Mapping) and item.get("type", "message") == "message":
            content = item.get("content")
            if isinstance(content, str):
                parts.append(content)
                continue
            for part in content or ():
                if isinstance(part, Mapping) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    parts.append(part["text"])
    return "".join(parts)


__all__ = ["MAX_DATASETS", "Score", "Scoring", "response_text"]
