"""NeMo Gym's verifier fixtures, ported: `exercise_verifier_fixture` runs each case of a JSONL on
a fresh server and holds it to its kind (full and zero rewards pinned to the range's ends, a
malformed request's error text, a seeded case giving the same reward twice), rewrites expected
rewards when asked, and says which case and why when one does not hold;
`check_resources_session_contract` drives an app's seed and close routes over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from gym_metrics.nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    ResourcesSeedSessionRequest,
    ResourcesSeedSessionResponse,
    SimpleResourcesServer,
)
from gym_metrics.nemo_gym.episode_types import EpisodeId, TaskId
from gym_metrics.nemo_gym.testing.session_conformance import check_resources_session_contract
from gym_metrics.nemo_gym.verifier_fixture import VerifierFixture, VerifierFixtureError, exercise_verifier_fixture


class _Answer(BaseModel):
    answer: str
    expected: str


class _Exact:
    """1.0 for the expected answer, 0.0 otherwise; a blank answer is an error; `seed` shifts
    a seeded server's reward (the determinism case)."""

    made = 0

    def __init__(self) -> None:
        type(self).made += 1
        self.bonus = 0.0

    async def verify(self, request: _Answer) -> dict[str, float]:
        if not request.answer:
            raise ValueError("empty answer")
        return {"reward": min(1.0, float(request.answer == request.expected) + self.bonus)}


def _fixture(tmp_path: Path, cases: list[dict[str, Any]], **kwargs: Any) -> VerifierFixture:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    return VerifierFixture(server_factory=_Exact, request_model=_Answer, cases_path=path, **kwargs)


FULL = {"name": "right", "kind": "full_reward", "request": {"answer": "4", "expected": "4"}, "expected_reward": 1.0}
ZERO = {"name": "wrong", "kind": "zero_reward", "request": {"answer": "5", "expected": "4"}, "expected_reward": 0.0}
BAD = {"name": "blank", "kind": "malformed", "request": {"answer": "", "expected": "4"}, "expected_error": "empty answer"}
SEEDED = {"name": "again", "kind": "determinism", "request": {"answer": "4", "expected": "4"}, "expected_reward": 1.0}


async def test_every_case_runs_on_a_fresh_server_and_holds(tmp_path: Path) -> None:
    before = _Exact.made
    results = await exercise_verifier_fixture(_fixture(tmp_path, [FULL, ZERO, BAD, SEEDED]), reward_range=(0.0, 1.0), determinism="stochastic")
    assert [(r.name, r.kind, r.observed_rewards) for r in results] == [("right", "full_reward", (1.0,)), ("wrong", "zero_reward", (0.0,)), ("blank", "malformed", ())]
    assert _Exact.made - before == 3  # the determinism case only runs when seeded


async def test_a_seeded_determinism_case_runs_twice_reseeded(tmp_path: Path) -> None:
    seen: list[str] = []

    def reseed(server: Any, request: Any) -> None:
        seen.append(request.answer)

    fixture = _fixture(tmp_path, [FULL, ZERO, BAD, SEEDED], reseed=reseed)
    results = await exercise_verifier_fixture(fixture, reward_range=[0, 1], determinism="seeded")
    assert results[-1].observed_rewards == (1.0, 1.0) and seen == ["4", "4"]
    with pytest.raises(VerifierFixtureError, match="requires a reseed adapter"):
        await exercise_verifier_fixture(_fixture(tmp_path, [FULL, ZERO, BAD, SEEDED]), reward_range=(0, 1), determinism="seeded")


@pytest.mark.parametrize(
    ("cases", "kwargs", "why"),
    [
        ([FULL, ZERO], {}, "missing required cases: malformed"),
        ([{**FULL, "expected_reward": 0.5}, ZERO, BAD], {}, "Case 'right' reward mismatch: expected 0.5, observed 1.0"),
        ([FULL, ZERO, {**BAD, "expected_error": "too long"}], {}, "Malformed case 'blank' error did not contain 'too long'"),
        ([FULL, ZERO, {**BAD, "request": {"answer": "4", "expected": "4"}}], {}, "Malformed case 'blank' did not raise"),
        ([ZERO | {"kind": "full_reward"}, ZERO, BAD], {}, "Full-reward case 'wrong' does not pin the upper endpoint"),
        ([FULL, ZERO, BAD], {"higher_is_better": False}, "Full-reward case 'right' does not pin the lower endpoint"),
        ([FULL, ZERO, BAD], {"reward_range": (0.0, 0.5)}, "returned reward 1.0 outside declared range [0.0, 0.5]"),
        ([FULL, ZERO, BAD], {"reward_range": (1.0, 0.0)}, "lower <= upper"),
        ([FULL, ZERO, BAD], {"determinism": "sometimes"}, "Unsupported determinism value: 'sometimes'"),
    ],
)
async def test_a_case_that_does_not_hold_is_named_with_why(tmp_path: Path, cases: list[dict[str, Any]], kwargs: dict[str, Any], why: str) -> None:
    options = {"reward_range": (0.0, 1.0), "determinism": "unknown", **kwargs}
    with pytest.raises(VerifierFixtureError) as caught:
        await exercise_verifier_fixture(_fixture(tmp_path, cases), **options)
    assert why in str(caught.value)


async def test_update_expected_rewrites_the_observed_rewards(tmp_path: Path) -> None:
    fixture = _fixture(tmp_path, [{**FULL, "expected_reward": 0.25}, ZERO, BAD])
    await exercise_verifier_fixture(fixture, reward_range=(0, 1), determinism="unknown", update_expected=True)
    lines = [json.loads(line) for line in Path(fixture.cases_path).read_text().splitlines()]
    assert lines[0]["expected_reward"] == 1.0 and lines[2] == {k: v for k, v in BAD.items()}
    assert list(lines[0]) == sorted(lines[0])  # sorted keys, None fields left out


async def test_a_bad_fixture_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(FULL) + "\n{not json\n")
    fixture = VerifierFixture(server_factory=_Exact, request_model=_Answer, cases_path=path)
    with pytest.raises(VerifierFixtureError, match=r"Invalid JSON in verifier fixture '.*cases.jsonl' at line 2"):
        await exercise_verifier_fixture(fixture, reward_range=(0, 1), determinism="unknown")


class _Sessions(SimpleResourcesServer):
    """Keeps seeded sessions; `recreates` makes it break the contract (a seed after close)."""

    recreates: bool = False

    def model_post_init(self, context: Any) -> None:
        self.__dict__["open"], self.__dict__["closed"] = set(), set()

    async def seed_session(self, body: ResourcesSeedSessionRequest) -> ResourcesSeedSessionResponse:  # type: ignore[override]
        from fastapi import HTTPException

        if body.resources_session_id in self.closed and not self.recreates:  # type: ignore[attr-defined]
            raise HTTPException(409, "closed")
        self.open.add(body.resources_session_id)  # type: ignore[attr-defined]
        return ResourcesSeedSessionResponse(resources_session_id=body.resources_session_id)

    async def close_resources_session(self, body: ResourcesCloseSessionRequest) -> ResourcesCloseSessionResponse:
        self.open.discard(body.resources_session_id)  # type: ignore[attr-defined]
        self.closed.add(body.resources_session_id)  # type: ignore[attr-defined]
        return ResourcesCloseSessionResponse(resources_session_id=body.resources_session_id)

    async def verify(self, body: Any) -> Any:  # never called here
        raise NotImplementedError


SEED = ResourcesSeedSessionRequest(resources_session_id="s1", episode_id=EpisodeId(rollout_id="r", attempt=0), task_id=TaskId(taskset="t", task_id="0"), task_data={})


@pytest.mark.parametrize("recreates", [False, True])
def test_the_session_contract_is_checked_through_the_routes(recreates: bool) -> None:
    server = _Sessions(config=BaseResourcesServerConfig(host="127.0.0.1", port=0, entrypoint="", name="s"), recreates=recreates)
    if not recreates:
        check_resources_session_contract(server.setup_webserver(), SEED, keeps_state=True)
        return
    with pytest.raises(AssertionError, match="seed after close recreated s1: 200"):
        check_resources_session_contract(server.setup_webserver(), SEED, keeps_state=True)
    check_resources_session_contract(server.setup_webserver(), SEED, keeps_state=False)  # nothing to recreate
