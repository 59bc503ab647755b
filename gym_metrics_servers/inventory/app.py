"""inventory: a stateful tool environment: the model brings a shop's stock to a goal through tools.

Each rollout gets a session seeded from its task row (`initial_stock`, and the goal:
`goal_stock`, `goal_shipped`). The model reads and changes that state with four tools
(`list_stock`, `receive_stock`, `ship_order`, `write_off`); a call the inventory refuses (an
item not in the catalogue, more units than are in stock) raises, and the model reads the error
as the tool's output. `verify` runs in the session: reward 1.0 iff the final stock and the
shipments equal the goal, whatever path the model took.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, Session, SimpleResourcesServer, register_server, tool
from gym_metrics.errors import FieldViolation, InvalidInputError

SAMPLE_PATH = Path(__file__).with_name("sample.jsonl")
"""The shipped sample: 8 tasks (no responses: `collect` runs them with a policy)."""

MAX_QUANTITY = 10_000
"""The most units one tool call may move."""


class InventoryError(Exception):
    """A tool call the inventory refuses; the model reads the message."""


# ----------------------------------------------------------------------------- models


class Movement(BaseModel):
    """Units of one item."""

    model_config = ConfigDict(extra="forbid")

    item: str = Field(min_length=1, description="The item's name, as list_stock shows it.")
    quantity: int = Field(gt=0, le=MAX_QUANTITY, description="How many units (at least 1).")


class WriteOff(Movement):
    """Units of one item taken out of stock without shipping them."""

    reason: str = Field(min_length=1, description="Why the units are written off (damaged, expired, recount, ...).")


class InventoryTask(BaseModel):
    """What a session is seeded with: the task row's stock and goal (other fields ignored)."""

    initial_stock: dict[str, int]
    """Units of each item in stock when the episode starts."""
    goal_stock: dict[str, int]
    """Units of each item that must be in stock at the end (an item not named: 0)."""
    goal_shipped: dict[str, int] = {}
    """Units of each item that must have been shipped at the end (an item not named: 0)."""

    def catalogue(self) -> list[str]:
        """Every item the task names: the only ones the tools accept."""
        return sorted({*self.initial_stock, *self.goal_stock, *self.goal_shipped})


class InventoryVerifyRequest(BaseVerifyRequest):
    """One episode: the task row (its goal) and the trajectory in `response`."""

    goal_stock: dict[str, int]
    goal_shipped: dict[str, int] = {}


class InventoryVerifyResponse(BaseVerifyResponse):
    """The verdict on the session's final state, and what the episode did."""

    goal_reached: bool = False
    """Final stock and shipments equal the goal (reward 1.0)."""
    units_off: int = 0
    """Units by which the final state misses the goal, summed over items (stock and shipped)."""
    changes: int = 0
    """Tool calls that changed the state (receive, ship, write off)."""
    tool_calls: int = 0
    """Function calls in the trajectory."""
    tool_errors: int = 0
    """Tool outputs that are errors: refused by the inventory, bad arguments, an unknown tool."""
    steps: int = 0
    """Policy turns in the trajectory."""
    final_stock: dict[str, int] = {}
    shipped: dict[str, int] = {}


# ----------------------------------------------------------------------------- state


def _counts(state: Mapping[str, Any], key: str) -> dict[str, int]:
    counts: dict[str, int] = state[key]
    return counts


def _known(state: Mapping[str, Any], item: str) -> str:
    if item not in state["catalogue"]:
        raise InventoryError(f"no item {item!r} in the catalogue (items: {', '.join(state['catalogue'])})")
    return item


def _take(state: dict[str, Any], move: Movement) -> int:
    """Take `move` out of stock; the units left. InventoryError when too few are in stock."""
    stock = _counts(state, "stock")
    have = stock.get(_known(state, move.item), 0)
    if move.quantity > have:
        raise InventoryError(f"only {have} {move.item} in stock, cannot take {move.quantity}")
    stock[move.item] = have - move.quantity
    state["changes"] += 1
    return stock[move.item]


def units_off(stock: Mapping[str, int], goal: Mapping[str, int]) -> int:
    """Sum over items of |stock - goal| (an item missing from either side counts as 0)."""
    return sum(abs(stock.get(item, 0) - goal.get(item, 0)) for item in {*stock, *goal})


def trajectory_counts(response: Any) -> tuple[int, int, int]:
    """(function calls, error outputs, policy turns) of a Responses API trajectory."""
    output = response.get("output") if isinstance(response, Mapping) else None
    calls = errors = steps = 0
    after_outputs = True  # a policy turn starts at the first item and after each run of tool outputs
    for item in output if isinstance(output, list) else []:
        if not isinstance(item, Mapping):
            continue
        is_output = item.get("type") == "function_call_output"
        steps += not is_output and after_outputs
        after_outputs = is_output
        calls += item.get("type") == "function_call"
        errors += is_output and _is_error(item.get("output"))
    return calls, errors, steps


def _is_error(output: Any) -> bool:
    try:
        parsed = json.loads(output) if isinstance(output, str) else output
    except json.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and "error" in parsed


# ----------------------------------------------------------------------------- the environment


@register_server("inventory")
class InventoryServer(SimpleResourcesServer):
    """Reward 1.0 iff the session's final stock and shipments equal the task's goal."""

    name = "inventory"
    sample = SAMPLE_PATH
    reducers = ["pass@1", "pass@4", "pass^4"]
    key_metrics = ["mean/reward", "pass@4", "pass^4", "mean/tool_errors", "mean/steps"]

    async def seed_session(self, session: Session) -> None:
        body = session.row_as(InventoryTask)
        if any(units < 0 for units in body.initial_stock.values()):
            raise InvalidInputError("a stock cannot be negative", [FieldViolation("initial_stock", "negative units")])
        session.state.update(
            stock=dict(body.initial_stock), shipped={}, written_off={}, catalogue=body.catalogue(), changes=0
        )

    async def close_session(self, session: Session) -> None:
        """Nothing beyond `session.state` to free (a real back end would release its handle here)."""

    @tool
    async def list_stock(self, session: Session) -> dict[str, Any]:
        """List every item of the catalogue with the units in stock and the units shipped so far."""
        return {"stock": session.state["stock"], "shipped": session.state["shipped"]}

    @tool
    async def receive_stock(self, args: Movement, session: Session) -> dict[str, Any]:
        """Receive units of an item from the supplier into stock."""
        stock = _counts(session.state, "stock")
        stock[_known(session.state, args.item)] = stock.get(args.item, 0) + args.quantity
        session.state["changes"] += 1
        return {"item": args.item, "in_stock": stock[args.item]}

    @tool
    async def ship_order(self, args: Movement, session: Session) -> dict[str, Any]:
        """Ship units of an item to the customer, out of stock (fails when fewer are in stock)."""
        left = _take(session.state, args)
        shipped = _counts(session.state, "shipped")
        shipped[args.item] = shipped.get(args.item, 0) + args.quantity
        return {"item": args.item, "shipped": shipped[args.item], "in_stock": left}

    @tool
    async def write_off(self, args: WriteOff, session: Session) -> dict[str, Any]:
        """Write off units of an item (damaged, expired): out of stock, not shipped (fails when fewer are in stock)."""
        left = _take(session.state, args)
        written = _counts(session.state, "written_off")
        written[args.item] = written.get(args.item, 0) + args.quantity
        return {"item": args.item, "written_off": written[args.item], "in_stock": left}

    async def verify(  # type: ignore[override]
        self, body: InventoryVerifyRequest, session: Session | None = None
    ) -> InventoryVerifyResponse:
        if session is None:
            raise InvalidInputError(
                "inventory verifies an episode in its session (collect with a policy runs one)",
                [FieldViolation("session_id", "missing: the final state lives in the rollout's session")],
            )
        stock, shipped = _counts(session.state, "stock"), _counts(session.state, "shipped")
        off = units_off(stock, body.goal_stock) + units_off(shipped, body.goal_shipped)
        calls, errors, steps = trajectory_counts(body.response)
        return InventoryVerifyResponse(
            **body.model_dump(),
            reward=float(off == 0),
            goal_reached=off == 0,
            units_off=off,
            changes=session.state["changes"],
            tool_calls=calls,
            tool_errors=errors,
            steps=steps,
            final_stock=dict(stock),
            shipped=dict(shipped),
        )


__all__ = [
    "SAMPLE_PATH",
    "InventoryError",
    "InventoryServer",
    "InventoryTask",
    "InventoryVerifyRequest",
    "InventoryVerifyResponse",
    "Movement",
    "WriteOff",
    "trajectory_counts",
    "units_off",
]
