"""The NeMo Gym agents whose loop gym-metrics runs itself (collect's agent loop, the `/run`
door), turn for turn as NeMo Gym's code runs them; every other agent's rows run its own code."""

NATIVE_AGENTS = frozenset({"simple_agent", "tool_simulation_agent", "non_executing_simple_agent", "gymnasium_agent"})
