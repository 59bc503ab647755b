"""NeMo Gym's verifier fixtures: an environment names a server factory, its request model and a
JSONL of cases (full reward, zero reward, malformed, determinism), and its own tests run verify
on each case in process (`exercise_verifier_fixture`), as under NeMo Gym: each case on a fresh
server, the full and zero cases pinned to the ends of the declared reward range, a malformed
case's error holding its expected text, a seeded case giving the same reward twice, and with
`update_expected` the observed rewards written back into the file (atomically)."""

from __future__ import annotations

import inspect
import json
import math
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
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
    expected_reward: Optional[float] = Field(default=None, strict=True, allow_inf_nan=False)
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
    """The cases of a fixture file; an unreadable file or a bad line raises
    VerifierFixtureError naming the file and the line."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeError) as exc:
        raise VerifierFixtureError(f"Could not read verifier fixture '{path}': {exc}") from exc
    cases = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            cases.append(VerifierFixtureCase.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise VerifierFixtureError(f"Invalid JSON in verifier fixture '{path}' at line {number}: {exc.msg}") from None
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
            raise VerifierFixtureError(f"Invalid verifier fixture '{path}' at line {number}: {first['msg']}") from None
    if not cases:
        raise VerifierFixtureError(f"Verifier fixture '{path}' contains no cases")
    return cases


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _reward(result: object, case: VerifierFixtureCase) -> float:
    reward = result.get("reward") if isinstance(result, Mapping) else getattr(result, "reward", result)
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        raise VerifierFixtureError(f"Case '{case.name}' returned a non-finite numeric reward: {reward!r}")
    return float(reward)


async def _run_case(fixture: VerifierFixture, case: VerifierFixtureCase, reseed: bool = False) -> float:
    """The case's reward on a fresh server (reseeded first when asked). An error of the
    server's propagates as it is (a malformed case reads it); the fixture's own raise
    VerifierFixtureError."""
    if reseed and fixture.reseed is None:
        raise VerifierFixtureError("a seeded determinism case requires a reseed adapter")
    try:
        server = fixture.server_factory()
    except Exception as exc:
        raise VerifierFixtureError(f"Case '{case.name}' could not create a fresh server: {exc}") from exc
    request = fixture.request_model.model_validate(case.request)
    if reseed:
        await _maybe_await(fixture.reseed(server, request))  # type: ignore[misc]
    if fixture.invoke is not None:
        result = await _maybe_await(fixture.invoke(server, request))
    else:
        verify = getattr(server, "verify", None)
        if not callable(verify):
            raise VerifierFixtureError("server_factory returned an object without a callable verify method")
        result = await _maybe_await(verify(request))
    return _reward(result, case)


async def _observe(fixture: VerifierFixture, case: VerifierFixtureCase, reseed: bool = False) -> float:
    try:
        return await _run_case(fixture, case, reseed)
    except VerifierFixtureError:
        raise
    except Exception as exc:
        raise VerifierFixtureError(f"Case '{case.name}' failed: {exc}") from exc


def _same(observed: float, expected: float, what: str) -> None:
    if observed != expected:
        raise VerifierFixtureError(f"{what}: expected {expected}, observed {observed}")


def _range(reward_range: Sequence[float], higher_is_better: bool) -> tuple[float, float]:
    if len(reward_range) != 2:
        raise VerifierFixtureError("reward_range must contain exactly two endpoints")
    if any(isinstance(end, bool) or not isinstance(end, (int, float)) for end in reward_range):
        raise VerifierFixtureError("reward_range endpoints must be finite numbers")
    lower, upper = float(reward_range[0]), float(reward_range[1])
    if not (math.isfinite(lower) and math.isfinite(upper)) or lower > upper:
        raise VerifierFixtureError("reward_range must contain finite endpoints with lower <= upper")
    if not isinstance(higher_is_better, bool):
        raise VerifierFixtureError("higher_is_better must be a boolean")
    return lower, upper


async def exercise_verifier_fixture(
    fixture: VerifierFixture,
    *,
    reward_range: Sequence[float],
    higher_is_better: bool = True,
    determinism: Union[str, Enum],
    update_expected: bool = False,
) -> tuple[VerifierFixtureResult, ...]:
    """Run every case of the fixture against a fresh server each and check it (see the module
    docstring); the results in the file's order, determinism cases only when `determinism` is
    "seeded". The first case that does not hold raises VerifierFixtureError saying why."""
    path = Path(fixture.cases_path)
    cases = load_verifier_fixture(path)
    lower, upper = _range(reward_range, higher_is_better)
    ends = {"full_reward": (upper, "upper"), "zero_reward": (lower, "lower")}
    if not higher_is_better:
        ends = {"full_reward": (lower, "lower"), "zero_reward": (upper, "upper")}
    seeded = str(getattr(determinism, "value", determinism))
    if seeded not in ("seeded", "stochastic", "unknown"):
        raise VerifierFixtureError(f"Unsupported determinism value: {seeded!r}")
    needed = {"full_reward", "zero_reward", "malformed", *(["determinism"] if seeded == "seeded" else [])}
    missing = sorted(needed - {case.kind for case in cases})
    if missing:
        raise VerifierFixtureError(f"Verifier fixture '{path}' is missing required cases: {', '.join(missing)}")

    results: list[VerifierFixtureResult] = []
    observed_by_case: dict[int, float] = {}
    for index, case in enumerate(cases):
        if case.kind == "determinism" and seeded != "seeded":
            continue
        if case.kind == "malformed":
            await _expect_error(fixture, case)
            results.append(VerifierFixtureResult(case.name, case.kind))
            continue
        observed = await _observe(fixture, case, reseed=case.kind == "determinism")
        if not lower <= observed <= upper:
            raise VerifierFixtureError(f"Case '{case.name}' returned reward {observed} outside declared range [{lower}, {upper}]")
        rewards = [observed]
        if case.kind in ends:
            end, side = ends[case.kind]
            kind = "Full-reward" if case.kind == "full_reward" else "Zero-reward"
            _same(observed, end, f"{kind} case '{case.name}' does not pin the {side} endpoint")
        else:
            rewards.append(await _observe(fixture, case, reseed=True))
            _same(rewards[1], observed, f"Determinism case '{case.name}' changed on a fresh server")
        if update_expected:
            observed_by_case[index] = observed
        else:
            _same(observed, float(case.expected_reward or 0.0), f"Case '{case.name}' reward mismatch")
        results.append(VerifierFixtureResult(case.name, case.kind, tuple(rewards)))

    if update_expected:
        updated = [case.model_copy(update={"expected_reward": observed_by_case[i]}) if i in observed_by_case else case for i, case in enumerate(cases)]
        if updated != cases:
            _rewrite(path, updated)
    return tuple(results)


async def _expect_error(fixture: VerifierFixture, case: VerifierFixtureCase) -> None:
    try:
        await _run_case(fixture, case)
    except VerifierFixtureError:
        raise
    except Exception as exc:
        if str(case.expected_error) not in str(exc):
            raise VerifierFixtureError(f"Malformed case '{case.name}' error did not contain {case.expected_error!r}: {exc}") from exc
        return
    raise VerifierFixtureError(f"Malformed case '{case.name}' did not raise an error")


def _rewrite(path: Path, cases: list[VerifierFixtureCase]) -> None:
    """The file replaced by `cases` (one sorted-key JSON object a line, None fields left out),
    through a synced temporary file beside it; a link or a non-file is refused."""
    if path.is_symlink() or not path.is_file():
        raise VerifierFixtureError(f"Refusing to replace non-regular verifier fixture '{path}'")
    text = "".join(json.dumps(case.model_dump(mode="json", exclude_none=True), sort_keys=True) + "\n" for case in cases)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(name, path.stat().st_mode & 0o777)
        os.replace(name, path)
    except OSError as exc:
        raise VerifierFixtureError(f"Could not update verifier fixture '{path}': {exc}") from exc
    finally:
        Path(name).unlink(missing_ok=True)


__all__ = [
    "VerifierFixture",
    "VerifierFixtureCase",
    "VerifierFixtureError",
    "VerifierFixtureResult",
    "exercise_verifier_fixture",
    "load_verifier_fixture",
]
