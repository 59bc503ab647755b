"""What collect makes of each input row, from its flags: `--prompt-config`'s template,
`--benchmark`'s rows as NeMo Gym collates them, NeMo Gym's routing (`--agent-map`,
`--fan-out`) and repeats by agent (`--num-repeats AGENT=K`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from gym_metrics.cli._base import positive_int, refuse_output_over_input
from gym_metrics.errors import FieldViolation, InvalidInputError


def repeats_entry(text: str) -> int | tuple[str, int]:
    """One `--num-repeats` value: K, or AGENT=K."""
    key, eq, count = text.rpartition("=")
    value = positive_int(count)
    if eq and not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: AGENT=K with an agent name")
    return (key.strip(), value) if eq else value


def _repeats(given: list[int | tuple[str, int]] | int | dict[str, int] | None) -> int | dict[str, int] | None:
    """`--num-repeats` given as K or as AGENT=K entries (K alone then `_default`); InvalidInputError
    for two Ks or one agent twice."""
    if not isinstance(given, list):
        return given
    counts = [v for v in given if isinstance(v, int)]
    pairs = [v for v in given if isinstance(v, tuple)]
    if len(counts) > 1 or len({k for k, _ in pairs}) != len(pairs) or (counts and any(k == "_default" for k, _ in pairs)):
        raise InvalidInputError("--num-repeats given twice", [FieldViolation("--num-repeats", "one K (or _default=K), and each AGENT=K once")])
    if not pairs:
        return counts[0] if counts else None
    return {**dict(pairs), **({"_default": counts[0]} if counts else {})}


def rows(ns: argparse.Namespace) -> Callable[[dict[str, Any]], tuple[dict[str, Any], bytes | None]] | None:
    """What each input row becomes (collector RowPrepare): `--benchmark`'s rows as NeMo Gym
    collates them, else `--prompt-config`'s template and `--agent-map` applied. Also settles
    `ns.num_repeats` (K, or K by agent), and what the benchmark implies (`--input`,
    `--num-repeats`, `--limit` counted in rollouts) unless given."""
    ns.num_repeats = _repeats(ns.num_repeats)
    ns.max_rollouts = None
    agents = _agent_map(ns.agent_map)
    if ns.benchmark is None:
        prompt = prompt_step(ns.prompt_config)
        steps = [step for step in (prompt, _rerouted(agents) if agents else None) if step is not None]
        return None if not steps else lambda row: (_through(steps, row), None)
    from gym_metrics.nemo_gym import read_benchmark

    if ns.agent is not None:  # the rows NeMo Gym collates name no agent: --agent runs them all (gym eval run --agent)
        if "_default" in agents:
            raise InvalidInputError("two default agents", [FieldViolation("--agent", "not with --agent-map _default=...")])
        agents["_default"] = ns.agent
    clash = [flag for flag, given in (("--reverify-failed", ns.reverify_failed), ("--reverify", ns.reverify), ("--fan-out", ns.fan_out),
                                      ("--num-repeats AGENT=K", isinstance(ns.num_repeats, dict))) if given]  # fmt: skip
    if clash:
        raise InvalidInputError("--benchmark runs the benchmark's rows with its agent",
                                [FieldViolation(flag, "not with --benchmark") for flag in clash])  # fmt: skip
    benchmark = read_benchmark(ns.benchmark)
    ns.benchmark_config = benchmark.config
    if ns.input is None:
        if not benchmark.data.is_file():
            raise benchmark.missing_data()
        ns.input = benchmark.data
        refuse_output_over_input({"--output": ns.output}, [ns.input])
    ns.num_repeats = ns.num_repeats or benchmark.num_repeats
    if ns.limit is not None:  # gym eval run's limit counts the collated lines: a row's repeats, one a line
        ns.max_rollouts, ns.limit = ns.limit, -(-ns.limit // ns.num_repeats)
    template = ns.prompt_config or (str(benchmark.prompt_config) if benchmark.prompt_config else None)
    maker = benchmark.row_maker(prompt_step(template), agents)
    if not ns.shard:  # what runs, said once (NeMo Gym prints its artifacts too)
        print(f"collect: benchmark {benchmark.name} ({benchmark.config}): {ns.input}, {ns.num_repeats} rollouts a row, "
              f"agent {benchmark.routed_agent(agents)}, prompt {template or 'in the rows'}", file=sys.stderr)  # fmt: skip
    return maker


def _agent_map(given: list[str]) -> dict[str, str]:
    """`--agent-map KEY=AGENT ...` as a mapping; InvalidInputError naming a bad one."""
    found: dict[str, str] = {}
    for item in given:
        key, eq, agent = item.partition("=")
        if not eq or not key.strip() or not agent.strip():
            raise InvalidInputError(f"--agent-map {item!r}", [FieldViolation("--agent-map", "KEY=AGENT, KEY an agent_ref.name, a task_source or _default")])
        found[key.strip()] = agent.strip()
    return found


def fan_out_map(given: list[str]) -> dict[str, list[str]] | None:
    """`--fan-out KEY=A,B ...` as a mapping (None without); InvalidInputError naming a bad one."""
    found: dict[str, list[str]] = {}
    for item in given:
        key, eq, agents = item.partition("=")
        names = [a.strip() for a in agents.split(",")]
        if not eq or not key.strip() or not all(names) or len(set(names)) != len(names):
            raise InvalidInputError(f"--fan-out {item!r}", [FieldViolation("--fan-out", "KEY=AGENT,AGENT: a key, then distinct agent names")])
        found[key.strip()] = names
    return found or None


def _rerouted(agents: dict[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """NeMo Gym's agent_map on a row: `agents[its agent_ref.name]`, else `agents[its task_source]`,
    else `agents["_default"]` becomes its `agent_ref` (`{"name": ...}`, as NeMo Gym writes it);
    a row none applies to keeps its own."""
    def reroute(row: dict[str, Any]) -> dict[str, Any]:
        ref = row.get("agent_ref")
        keys = (ref.get("name") if isinstance(ref, dict) else None, row.get("task_source"))
        target = next((agents[k] for k in keys if isinstance(k, str) and k in agents), agents.get("_default"))
        return row if target is None else {**row, "agent_ref": {"name": target}}

    return reroute


def _through(steps: list[Callable[[dict[str, Any]], dict[str, Any]]], row: dict[str, Any]) -> dict[str, Any]:
    for step in steps:
        row = step(row)
    return row


def prompt_step(path: str | None) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """The row change of `--prompt-config` (NeMo Gym's `+prompt_config`), its file read now."""
    if path is None:
        return None
    import pydantic
    import yaml

    from gym_metrics.nemo_gym.prompt import apply_prompt_to_row, load_prompt_config

    try:
        template = load_prompt_config(path)
    except (OSError, yaml.YAMLError, pydantic.ValidationError) as exc:
        if isinstance(exc, pydantic.ValidationError):
            detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors()[:3])
        else:
            detail = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc).splitlines()[0]
        why = f"{path}: {detail}"
        raise InvalidInputError("bad --prompt-config", [FieldViolation("--prompt-config", why)]) from None

    def prepare(row: dict[str, Any]) -> dict[str, Any]:
        params = row.get("responses_create_params")
        if isinstance(params, dict) and params.get("input"):  # NeMo Gym refuses the run
            raise ValueError("is given, and --prompt-config too: they are mutually exclusive")
        try:
            return apply_prompt_to_row(row, template)
        except (KeyError, IndexError, AttributeError, ValueError) as exc:  # a field the row lacks, a bad placeholder
            raise ValueError(f"--prompt-config {path}: {exc.args[0] if exc.args else exc}") from None

    return prepare
