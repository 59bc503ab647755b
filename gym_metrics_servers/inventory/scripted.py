"""A scripted policy for the shipped sample: per prompt, the answer of each step of its
episode (some reach the goal, some do not). What the tests and `gym-metrics demo --agent` run
against, so both need no model."""

from __future__ import annotations

from typing import Any

from gym_metrics.testing import PolicyAnswer


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


DONE = PolicyAnswer(text="Done.")
SCRIPT: dict[str, list[PolicyAnswer]] = {
    # succeeds in one tool turn
    "Ship 3 widgets to the customer.": [PolicyAnswer(tool_calls=[_call("ship_order", item="widget", quantity=3)]), DONE],
    # a bad argument, corrected after reading the error
    "A delivery of 10 bolts arrived: receive it.": [
        PolicyAnswer(tool_calls=[_call("receive_stock", item="bolt", quantity=-10)]),
        PolicyAnswer(tool_calls=[_call("receive_stock", item="bolt", quantity=10)]),
        DONE,
    ],
    # two calls in one turn
    "Two lamps arrived broken: write them off, then ship 1 lamp.": [
        PolicyAnswer(tool_calls=[_call("write_off", item="lamp", quantity=2, reason="broken"), _call("ship_order", item="lamp", quantity=1)]),
        DONE,
    ],
    # ships before receiving, is refused, gives up: fails
    "Ship 6 chairs. We have only 4: receive the 2 missing chairs from the supplier first.": [
        PolicyAnswer(tool_calls=[_call("ship_order", item="chair", quantity=6)]),
        PolicyAnswer(text="I could not ship the chairs."),
    ],
    # fixes one item of three: fails, 3 units off
    "After a recount every item must have exactly 5 units in stock: receive or write off (reason 'recount') as needed.": [
        PolicyAnswer(tool_calls=[_call("receive_stock", item="cup", quantity=2)]),
        DONE,
    ],
    # calls a tool that does not exist, then the right ones
    "Ship 2 kettles and 1 toaster, then restock kettles to 3 units.": [
        PolicyAnswer(tool_calls=[_call("restock", item="kettle", quantity=3)]),
        PolicyAnswer(tool_calls=[_call("ship_order", item="kettle", quantity=2), _call("ship_order", item="toaster", quantity=1)]),
        PolicyAnswer(tool_calls=[_call("receive_stock", item="kettle", quantity=3)]),
        DONE,
    ],
    # every call succeeds, but it receives 11, not 12: one unit short
    "Write off 1 expired milk, ship 4 milk and receive 12 milk.": [
        PolicyAnswer(tool_calls=[_call("ship_order", item="milk", quantity=4)]),
        PolicyAnswer(tool_calls=[_call("write_off", item="milk", quantity=1, reason="expired")]),
        PolicyAnswer(tool_calls=[_call("receive_stock", item="milk", quantity=11)]),
        DONE,
    ],
    # reads the stock first, then ships what it read
    "Check the stock and ship every pen we have.": [
        PolicyAnswer(tool_calls=[_call("list_stock")]),
        PolicyAnswer(tool_calls=[_call("ship_order", item="pen", quantity=7)]),
        DONE,
    ],
}
