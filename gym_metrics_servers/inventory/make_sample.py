"""Regenerate sample.jsonl: 8 inventory tasks, each with the environment's tools in its request.

Run `python gym_metrics_servers/inventory/make_sample.py` (or `python -m gym_metrics_servers.inventory.make_sample`).
Each row is a task without a response: `responses_create_params` (the prompt and the tools as
Responses API function tools), the seed fields (`initial_stock`) and the goal (`goal_stock`,
`goal_shipped`), and `agent_ref`. A test checks the file is up to date with the tools.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("sample.jsonl")
AGENT = "inventory_agent"
INSTRUCTIONS = (
    "You manage a shop's inventory through the tools. Do exactly what the request asks, "
    "then answer with one sentence saying what you did."
)

# (id, request, initial stock, goal stock, goal shipped)
TASKS: list[tuple[str, str, dict[str, int], dict[str, int], dict[str, int]]] = [
    ("ship", "Ship 3 widgets to the customer.", {"widget": 5, "gadget": 2}, {"widget": 2, "gadget": 2}, {"widget": 3}),
    ("receive", "A delivery of 10 bolts arrived: receive it.", {"bolt": 4, "nut": 7}, {"bolt": 14, "nut": 7}, {}),
    ("write_off_then_ship", "Two lamps arrived broken: write them off, then ship 1 lamp.", {"lamp": 4}, {"lamp": 1}, {"lamp": 1}),
    ("receive_before_ship", "Ship 6 chairs. We have only 4: receive the 2 missing chairs from the supplier first.",
     {"chair": 4, "table": 1}, {"chair": 0, "table": 1}, {"chair": 6}),
    ("recount", "After a recount every item must have exactly 5 units in stock: receive or write off (reason 'recount') as needed.",
     {"cup": 3, "plate": 8, "bowl": 5}, {"cup": 5, "plate": 5, "bowl": 5}, {}),
    ("ship_and_restock", "Ship 2 kettles and 1 toaster, then restock kettles to 3 units.",
     {"kettle": 2, "toaster": 1}, {"kettle": 3, "toaster": 0}, {"kettle": 2, "toaster": 1}),
    ("expired_milk", "Write off 1 expired milk, ship 4 milk and receive 12 milk.", {"milk": 6}, {"milk": 13}, {"milk": 4}),
    ("ship_all_pens", "Check the stock and ship every pen we have.", {"pen": 7, "pencil": 3}, {"pen": 0, "pencil": 3}, {"pen": 7}),
]


def function_tools() -> list[dict[str, Any]]:
    """The environment's tools as Responses API function tools (what GetServerInfo publishes)."""
    from gym_metrics_servers.inventory.app import InventoryServer

    return [spec.as_function_tool() for spec in InventoryServer().tools().values()]


def rows() -> list[dict[str, Any]]:
    tools = function_tools()
    return [
        {
            "id": task_id,
            "responses_create_params": {
                "instructions": INSTRUCTIONS,
                "input": [{"role": "user", "content": request}],
                "tools": tools,
            },
            "initial_stock": initial,
            "goal_stock": goal,
            "goal_shipped": shipped,
            "agent_ref": {"name": AGENT},
        }
        for task_id, request, initial, goal, shipped in TASKS
    ]


def render() -> str:
    return "".join(json.dumps(row) + "\n" for row in rows())


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {len(TASKS)} tasks to {OUT}")
