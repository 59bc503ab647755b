"""reasoning_gym: any reasoning-gym task row scored exactly as reasoning-gym scores it.

A row (as `gym-metrics dataset reasoning-gym` writes it) carries its entry and the settings
that rebuild its dataset; `verify` takes the answer from the model's output text with
reasoning-gym's `extract_answer` (the last `<answer>...</answer>`) and the reward is the
dataset's `score_answer(answer, entry)`, partial credit kept. Metrics: the listed reducers
(`mean_reward`, `pass@1`; `serve --reducers` for pass@k) overall and per dataset
(`<dataset>/pass@1`, ..., from the `reward/<dataset>` column verify adds: no row dicts). Needs the `reasoning-gym` extra; nothing of it is imported until the
environment is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, MetricColumns, SimpleResourcesServer, register_server
from gym_metrics.ecosystems.reasoning_gym import DatasetRef, Scoring, dataset_field, entry_of, per_dataset_metrics, response_text
from gym_metrics.errors import FieldViolation, InvalidInputError

SAMPLE_PATH = Path(__file__).with_name("sample.jsonl")
"""The shipped sample: answered rows of three datasets (right, wrong, partly right, malformed)."""
WHERE = "body_json"


class ReasoningGymRequest(BaseVerifyRequest):
    """One answered task row: the model's response, the entry, and what rebuilds its dataset."""

    response: dict[str, Any]
    """The model's Responses API response (required: a task nobody answered is not a 0)."""
    reasoning_gym: DatasetRef
    """`create_dataset(dataset, seed=seed, size=size, **config)[index]` is the entry."""
    entry: dict[str, Any]
    """The entry as reasoning-gym generated it: `question`, `answer`, `metadata`."""
    entry_types: dict[str, str] = pydantic.Field(default_factory=dict)
    """Where the entry held a tuple or an int-keyed dict before JSON (path -> kind)."""

    @pydantic.field_validator("entry")
    @classmethod
    def _an_entry(cls, entry: dict[str, Any]) -> dict[str, Any]:
        missing = [key for key in ("question", "answer", "metadata") if key not in entry]
        if missing:
            raise ValueError(f"an entry has question, answer and metadata; this one lacks {', '.join(missing)}")
        return entry


class ReasoningGymResponse(BaseVerifyResponse):
    """reasoning-gym's score as the reward, and what it was computed from."""

    dataset: str
    """The entry's dataset. The reward is also returned as `reward/<dataset>`: the per-dataset
    metrics group by that column."""
    extracted_answer: str | None = None
    """The text of the last `<answer>...</answer>`; None when there is none (scored as such)."""
    answer_found: bool = False
    """An `<answer>` tag was there (aggregates as the share of well-formed outputs)."""
    expected_answer: str | None = None
    """The entry's answer, when it has one as text (some datasets accept several answers)."""
    score_error: str | None = None
    """What the dataset's scorer raised, when it did (the reward is then 0.0)."""


@register_server("reasoning_gym")
class ReasoningGymServer(SimpleResourcesServer):
    """Scores reasoning-gym rows with reasoning-gym's own scorers (module docstring)."""

    name = "reasoning_gym"
    sample = SAMPLE_PATH
    eager_verify = True  # pure CPU, no I/O: no Task per rollout before Python 3.12
    reducers = ["mean_reward", "pass@1"]

    def __init__(self) -> None:
        super().__init__()
        self.scoring = Scoring(where=f"{WHERE}.reasoning_gym")  # ReasoningGymMissingError without the extra

    async def verify(self, body: ReasoningGymRequest) -> ReasoningGymResponse:
        try:
            entry = entry_of(body.entry, body.entry_types)
        except ValueError as exc:
            raise InvalidInputError("the entry does not fit its entry_types", [FieldViolation(f"{WHERE}.entry_types", str(exc))]) from None
        score = self.scoring.score(response_text(body.response), body.reasoning_gym, entry)
        expected = entry.get("answer")
        dataset = body.reasoning_gym.dataset
        return ReasoningGymResponse(
            reward=score.reward,
            dataset=dataset,
            extracted_answer=score.answer,
            answer_found=score.answer is not None,
            expected_answer=expected if isinstance(expected, str) else None,
            score_error=score.error,
            **{dataset_field(dataset): score.reward},  # the group of the per-dataset metrics, as a column
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """compute_metrics_columns' answer from rows grouped by task (NeMo Gym's hook; the
        framework calls the columnar one)."""
        return self.compute_metrics_columns(MetricColumns.from_task_rows(tasks))

    def compute_metrics_columns(self, columns: MetricColumns) -> dict[str, Any]:
        """The listed reducers per dataset, keyed `<dataset>/<reducer>`, from the `reward/<dataset>`
        columns (the overall ones come from the reducers themselves)."""
        return dict(per_dataset_metrics(columns, self.listed_reducers()))

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """`mean/reward` and each listed reducer's overall value (not its interval, not per dataset)."""
        names = ["mean/reward", *self.listed_reducers()]
        return {name: agent_metrics[name] for name in names if name in agent_metrics}


__all__ = ["SAMPLE_PATH", "ReasoningGymRequest", "ReasoningGymResponse", "ReasoningGymServer"]
