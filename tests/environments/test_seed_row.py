"""One way to write seed_session (issue 38, item 2): `seed_session(self, session)` with
`session.row_as(Model)`, which refuses a row that does not fit by naming its fields; the older
`seed_session(self, session, body)` keeps working and says it is deprecated."""

from __future__ import annotations

import json
import warnings

import pydantic
import pytest

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer
from gym_metrics.environments import Sessions, Session
from gym_metrics.errors import InvalidInputError


class Stock(pydantic.BaseModel):
    units: dict[str, int]


class Now(SimpleResourcesServer):
    async def seed_session(self, session: Session) -> None:
        session.state["units"] = session.row_as(Stock).units

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward=0.0)


class Before(Now):
    async def seed_session(self, session: Session, body: Stock) -> None:  # type: ignore[override]  # the old form, on purpose
        session.state["units"] = body.units


async def test_row_as_validates_the_row_and_names_what_does_not_fit() -> None:
    sessions = Sessions(Now())
    session = await sessions.seed(json.dumps({"units": {"apple": 3}, "other": "ignored"}))
    assert session.state["units"] == {"apple": 3}
    with pytest.raises(InvalidInputError) as refused:
        await sessions.seed(json.dumps({"units": {"apple": "three"}}))
    assert "does not fit Stock" in str(refused.value)
    assert [v.field for v in refused.value.violations] == ["body_json.units.apple"]
    assert len(sessions.store) == 1  # the refused seed left no session


async def test_the_old_two_argument_form_still_seeds_and_warns() -> None:
    sessions = Sessions(Before())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = await sessions.seed(json.dumps({"units": {"pear": 1}}))
    assert session.state["units"] == {"pear": 1}
    assert any(issubclass(w.category, DeprecationWarning) and "session.row_as" in str(w.message) for w in caught)
