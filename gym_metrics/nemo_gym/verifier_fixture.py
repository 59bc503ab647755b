"""NeMo Gym's verifier fixture declaration: an environment names a server factory, its request
model and a JSONL of cases (full reward, zero reward, malformed, determinism) its own tests check
verify against. Declaring one at import time works as under NeMo Gym; the cases load and validate."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

CaseKind = Literal["full_reward", "zero_reward", "malformed", "determinism"]
Invocation = Callable[[object, BaseModel], Union[object, Awaitable[object]]]


class VerifierFixtureError(ValueError):
    """A fixture is invalid or does not match the verifier's behaviour."""


@dataclass(frozen=True)
class VerifierFixture:
    server_factory: Callable[[], object]
    request_model: type[BaseModel]
    cases_path: Union[str, Path]
    invoke: Optional[Invocation] = None
    reseed: Optional[Invocation] = None


class VerifierFixtureCase(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: str = Field(min_length=1)
    kind: CaseKind
    request: dict[str, Any]
    expected_reward: Optional[float] = Field(default=None, allow_inf_nan=False)
    expected_error: Optional[str] = None

    @model_validator(mode="after")
    def _expectation(self) -> VerifierFixtureCase:
        if self.kind == "malformed":
            if not self.expected_error or self.expected_reward is not None:
                raise ValueError("a malformed case requires expected_error and forbids expected_reward")
        elif self.expected_reward is None or self.expected_error is not None:
            raise ValueError(f"a {self.kind} case requires expected_reward and forbids expected_error")
        return self


@dataclass(frozen=True)
class VerifierFixtureResult:
    name: str
    kind: CaseKind
    observed_rewards: tuple[float, ...] = ()


def load_verifier_fixture(path: Union[str, Path]) -> list[VerifierFixtureCase]:
    """The cases of a fixture file; a bad line raises VerifierFixtureError naming it."""
    cases = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            cases.append(VerifierFixtureCase.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            raise VerifierFixtureError(f"{path}:{number}: {exc}") from None
    if not cases:
        raise VerifierFixtureError(f"{path}: no cases")
    return cases


__all__ = [
    "VerifierFixture",
    "VerifierFixtureCase",
    "VerifierFixtureError",
    "VerifierFixtureResult",
    "load_verifier_fixture",
]
