"""`check_resources_session_contract`: an environment's own test that its app keeps NeMo Gym's
session contract, driven through the app's real routes and middleware in process (a FastAPI
TestClient), as an environment server calls a deployed resources server.

The contract: a seed and the same seed again both answer 200 naming the session; a close and the
same close again both answer 200 naming it; closing a session never seeded answers 200; and a
server that keeps state refuses (status 400 or more) a seed arriving after its session was
closed, and a seed of the id closed without ever being seeded. A route registered over
`/seed_session` or `/close_session` fails it too.
"""

from __future__ import annotations

from typing import Any

from gym_metrics.nemo_gym.base_resources_server import (
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    ResourcesSeedSessionRequest,
    ResourcesSeedSessionResponse,
)


def check_resources_session_contract(app: Any, seed: ResourcesSeedSessionRequest, *, keeps_state: bool) -> None:
    """Seed, re-seed and close `seed`'s session through `app` (its id one the app has not
    seen); an AssertionError says which step broke the contract."""
    from fastapi.testclient import TestClient

    client = TestClient(app, raise_server_exceptions=False)
    session = seed.resources_session_id
    unseeded = seed.model_copy(update={"resources_session_id": f"{session}-never-seeded"})

    def close_body(request: ResourcesSeedSessionRequest) -> dict[str, Any]:
        return ResourcesCloseSessionRequest(resources_session_id=request.resources_session_id, episode_id=seed.episode_id).model_dump(mode="json")

    for step in ("seed", "repeated seed"):
        answer = client.post("/seed_session", json=seed.model_dump(mode="json"))
        assert answer.status_code == 200, f"{step} failed: {answer.status_code} {answer.text}"
        named = ResourcesSeedSessionResponse.model_validate(answer.json()).resources_session_id
        assert named == session, f"{step} returned another session"
    for step in ("close", "repeated close"):
        answer = client.post("/close_session", json=close_body(seed))
        assert answer.status_code == 200, f"{step} failed: {answer.status_code} {answer.text}"
        named = ResourcesCloseSessionResponse.model_validate(answer.json()).resources_session_id
        assert named == session, f"{step} named another session"
    answer = client.post("/close_session", json=close_body(unseeded))
    assert answer.status_code == 200, f"close of a never-seeded session failed: {answer.status_code}"
    if keeps_state:
        for late in (seed, unseeded):
            answer = client.post("/seed_session", json=late.model_dump(mode="json"))
            assert answer.status_code >= 400, f"seed after close recreated {late.resources_session_id}: {answer.status_code}"


__all__ = ["check_resources_session_contract"]
