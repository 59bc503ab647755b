"""reasoning-gym datasets as task rows in the shape `collect` reads, one row per entry in the
dataset's order, each carrying its entry and what rebuilds it.

A row:

    {"responses_create_params": {"input": [{"role": "system", "content": PROMPT},
                                            {"role": "user", "content": QUESTION}]},
     "agent_ref": {"name": "policy"},
     "reasoning_gym": {"dataset": NAME, "config": {...}, "seed": S, "size": N, "index": I},
     "entry": {"question": ..., "answer": ..., "metadata": {...}},
     "entry_types": {...}}                     # only when JSON lost a tuple or an int key

PROMPT is one of reasoning-gym's own system prompts (`default`, the one its evaluation sends);
`reasoning_gym` is what `create_dataset(NAME, seed=S, size=N, **config)[I]` rebuilds the entry
from, so the row is its own answer key. A mix is reasoning-gym's composite dataset: entry I is
entry I of the part its seeded draw picks, and the row names that part (its seed is the mix's
seed + its position + 1, its size the mix's, as the composite builds them).

Each entry is generated with Python's global `random` and numpy's global generator seeded by
the entry's own seed (the dataset's seed + the index, as reasoning-gym seeds the entry's Random)
and their states put back after. Most datasets never touch them; codeio runs reference programs
that do (a Game of Life grid from `random.randint`, others from `np.random`), so reasoning-gym
itself gives a new answer key each time it builds such an entry. Seeded, the same command
writes the same file, any worker count gives the same rows, and `rebuild_entry` gives a row's
entry back.
"""

from __future__ import annotations

import math

import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
import pydantic

from gym_metrics.ecosystems.reasoning_gym._library import dataset_kwargs, library, system_prompts
from gym_metrics.ecosystems.reasoning_gym._types import python_types, restore
from gym_metrics.errors import FieldViolation, InvalidInputError

DEFAULT_PROMPT = "default"
"""The system prompt reasoning-gym's evaluation sends (`reasoning_gym.utils.SYSTEM_PROMPTS`)."""
NO_PROMPT = "none"
DEFAULT_AGENT = "policy"


class DatasetRef(pydantic.BaseModel):
    """What rebuilds a row's entry: `create_dataset(dataset, seed=seed, size=size, **config)[index]`."""

    dataset: str
    """A name reasoning-gym registers (`gym-metrics dataset reasoning-gym --list`)."""
    config: dict[str, Any] = pydantic.Field(default_factory=dict)
    """The dataset's settings as given (JSON values; defaults left out)."""
    seed: int
    size: int = pydantic.Field(ge=1)
    index: int = pydantic.Field(ge=0)

    @pydantic.model_validator(mode="after")
    def _inside(self) -> DatasetRef:
        if self.index >= self.size:
            raise ValueError(f"index {self.index} is past the dataset's size {self.size}")
        return self

    def key(self) -> tuple[str, bytes, int, int]:
        """The dataset object's identity (the index aside): equal keys, equal datasets."""
        return self.dataset, orjson.dumps(self.config, option=orjson.OPT_SORT_KEYS), self.seed, self.size


@dataclass(frozen=True)
class MixPart:
    """One dataset of a mix: its weight in the draw and its settings."""

    name: str
    weight: float
    config: dict[str, Any] = field(default_factory=dict)


def create(name: str, config: Mapping[str, Any], seed: int, size: int, *, name_field: str, config_field: str) -> Any:
    """reasoning-gym's dataset for these settings; InvalidInputError naming the field at fault
    (an unknown name, a setting the dataset lacks or refuses)."""
    kwargs = dataset_kwargs(name, config, name_field, config_field)
    try:
        return library().create_dataset(name, seed=seed, size=size, **kwargs)
    except Exception as exc:  # its config's validate() asserts; a constructor may raise anything
        raise InvalidInputError(f"reasoning-gym cannot build {name!r} with this config", [FieldViolation(config_field, _why(exc))]) from None


def dataset_rows(
    name: str, *, size: int, seed: int, config: Mapping[str, Any] | None = None,
    prompt: str = DEFAULT_PROMPT, agent: str = DEFAULT_AGENT, indices: range | None = None,
) -> Iterator[dict[str, Any]]:  # fmt: skip
    """One task row per entry of the dataset, in its order (module docstring); `indices`: only
    those entries (each entry depends on its index alone, so slices join into the whole)."""
    given = dict(config or {})
    dataset = create(name, given, seed, size, name_field="NAME", config_field="--config")
    system = _system(prompt)
    DatasetRef(dataset=name, config=given, seed=seed, size=size, index=0)  # (checked once; each row's is that with its index)
    for index in range(size) if indices is None else indices:
        ref = {"dataset": name, "config": given, "seed": seed, "size": size, "index": index}
        yield task_row(_entry(dataset, index), ref, system, agent)


def mix_rows(
    parts: list[MixPart], *, size: int, seed: int, prompt: str = DEFAULT_PROMPT, agent: str = DEFAULT_AGENT,
    indices: range | None = None,
) -> Iterator[dict[str, Any]]:  # fmt: skip
    """One task row per entry of reasoning-gym's composite of `parts`, in its order (or of
    `indices` only)."""
    _check_mix(parts)
    library()
    from reasoning_gym.composite import CompositeConfig, CompositeDataset, DatasetSpec

    specs = []
    for part in parts:
        kwargs = dataset_kwargs(part.name, part.config, "--mix", f"--config {part.name}")
        specs.append(DatasetSpec(name=part.name, weight=part.weight, config=kwargs))
    try:
        mix = CompositeDataset(CompositeConfig(size=size, seed=seed, datasets=specs))
    except Exception as exc:
        raise InvalidInputError("reasoning-gym cannot build this mix", [FieldViolation("--mix", _why(exc))]) from None
    mix.datasets = {name: _Seeded(part) for name, part in mix.datasets.items()}  # the composite only indexes its parts
    given = {part.name: part.config for part in parts}
    system = _system(prompt)
    for index in range(size) if indices is None else indices:
        entry = mix[index]
        name = entry["metadata"]["source_dataset"]  # how the composite itself finds an entry's scorer
        part = mix.datasets[name].dataset
        ref = {"dataset": name, "config": given[name], "seed": part.seed, "size": part.size, "index": index}
        yield task_row(entry, ref, system, agent)


def task_row(entry: Mapping[str, Any], ref: Mapping[str, Any], system: str | None, agent: str) -> dict[str, Any]:
    """The row of one entry (module docstring; `ref`: a DatasetRef's fields), the entry as
    reasoning-gym made it: write it with `json_bytes`, which writes what JSON cannot hold as
    `entry_types` says."""
    try:
        types = python_types(entry)
    except TypeError as exc:
        raise InvalidInputError(f"{ref['dataset']} entry {ref['index']} cannot be written as JSON: {exc}") from None
    messages = [{"role": "system", "content": system}] if system is not None else []
    messages.append({"role": "user", "content": entry["question"]})
    row: dict[str, Any] = {
        "responses_create_params": {"input": messages},
        "agent_ref": {"name": agent},
        "reasoning_gym": dict(ref),
        "entry": entry,
    }
    if types:
        row["entry_types"] = types
    return row


def entry_of(entry: Mapping[str, Any], types: Mapping[str, str]) -> dict[str, Any]:
    """A row's entry as reasoning-gym made it: the JSON object with `entry_types` put back."""
    return restore(dict(entry), types)


def rebuild_entry(ref: DatasetRef) -> dict[str, Any]:
    """The entry reasoning-gym generates for `ref` (what a row's entry must equal)."""
    dataset = create(ref.dataset, ref.config, ref.seed, ref.size, name_field="reasoning_gym.dataset", config_field="reasoning_gym.config")
    return _entry(dataset, ref.index)


@contextmanager
def _global_random(seed: int) -> Iterator[None]:
    """Python's and numpy's global generators seeded by `seed`, their states put back after."""
    import numpy as np

    state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        random.setstate(state)
        np.random.set_state(np_state)


def _entry(dataset: Any, index: int) -> dict[str, Any]:
    """`dataset[index]` with the global `random` seeded by the entry's seed (module docstring)."""
    with _global_random(dataset.seed + index):
        entry: dict[str, Any] = dataset[index]
    return entry


class _Seeded:
    """A mix's part whose entries are generated as `_entry` generates them."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __getitem__(self, index: int) -> dict[str, Any]:
        return _entry(self.dataset, index)


def _system(prompt: str) -> str | None:
    if prompt == NO_PROMPT:
        return None
    prompts = system_prompts()
    if prompt not in prompts:
        raise InvalidInputError(f"unknown system prompt {prompt!r}", [FieldViolation("--system-prompt", f"reasoning-gym's: {', '.join(prompts)}, or {NO_PROMPT}")])
    return prompts[prompt]


def _check_mix(parts: list[MixPart]) -> None:
    if not parts:
        raise InvalidInputError("an empty mix", [FieldViolation("--mix", "give NAME:WEIGHT at least once")])
    seen: set[str] = set()
    for part in parts:
        if part.name in seen:
            raise InvalidInputError(f"{part.name} is in the mix twice", [FieldViolation("--mix", "each dataset once (reasoning-gym's composite refuses repeats)")])
        seen.add(part.name)
        if not (part.weight > 0 and math.isfinite(part.weight)):
            raise InvalidInputError(f"{part.name}: weight {part.weight}", [FieldViolation("--mix", "a weight is a finite number > 0")])
    if not math.isfinite(sum(part.weight for part in parts)):
        raise InvalidInputError("the weights sum past what a float holds", [FieldViolation("--mix", "give smaller weights (only their ratios count)")])


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


__all__ = ["DEFAULT_AGENT", "DEFAULT_PROMPT", "NO_PROMPT", "DatasetRef", "MixPart", "create", "dataset_rows", "entry_of", "mix_rows", "rebuild_entry", "task_row"]
