"""What collect makes of each input row, from its flags: `--prompt-config`'s template,
`--benchmark`'s rows as NeMo Gym collates them, NeMo Gym's routing (`--agent-map`,
`--fan-out`) and repeats by agent (`--num-repeats AGENT=K`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from gym_metrics.cli._base import bounded_int, refuse_output_over_input
from gym_metrics.errors import FieldViolation, InvalidInputError

MAX_REPEATS = 100_000
"""The most rollouts `--num-repeats` makes of one row: a row's rollout indices are listed in
memory before its first rollout starts (1,000,000,000 grew to 23 GB before any output)."""


def repeats_entry(text: str) -> int | tuple[str, int]:
    """One `--num-repeats` value: K (1..MAX_REPEATS), or AGENT=K."""
    key, eq, count = text.rpartition("=")
    value = bounded_int(count, 1, MAX_REPEATS, " rollouts of a row (its rollout indices are listed in memory up front)")
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
        if ns.split != "benchmark":
            raise InvalidInputError("--split names a config's datasets", [FieldViolation("--split", "give the config with --benchmark CONFIG.yaml")])
        prompt = prompt_step(ns.prompt_config)
        steps = [step for step in (prompt, _rerouted(agents) if agents else None) if step is not None]
        return None if not steps else lambda row: (_through(steps, row), None)
    from gym_metrics.nemo_gym import read_benchmarks

    if ns.agent is not None:  # the rows NeMo Gym collates name no agent: --agent runs them all (gym eval run --agent)
        if "_default" in agents:
            raise InvalidInputError("two default agents", [FieldViolation("--agent", "not with --agent-map _default=...")])
        agents["_default"] = ns.agent
    clash = [flag for flag, given in (("--reverify-failed", ns.reverify_failed), ("--reverify", ns.reverify), ("--fan-out", ns.fan_out),
                                      ("--num-repeats AGENT=K", isinstance(ns.num_repeats, dict))) if given]  # fmt: skip
    if clash:
        raise InvalidInputError("--benchmark runs the benchmark's rows with its agent",
                                [FieldViolation(flag, "not with --benchmark") for flag in clash])  # fmt: skip
    benchmark = read_benchmarks(ns.benchmark, ns.split)
    ns.benchmark_config = benchmark.config
    ns.suite = None
    if not hasattr(benchmark, "row_maker"):
        return _suite_rows(ns, benchmark, agents)
    if ns.input is None:
        if not benchmark.data.is_file():
            raise benchmark.missing_data()
        ns.input = benchmark.data
        refuse_output_over_input({"--output": ns.output}, [ns.input])
    ns.num_repeats = ns.num_repeats or benchmark.num_repeats
    if ns.limit is not None:  # gym eval run's limit counts the collated lines: a row's repeats, one a line
        ns.max_rollouts, ns.limit = ns.limit, -(-ns.limit // ns.num_repeats)
    template = ns.prompt_config or (str(benchmark.prompt_config) if benchmark.prompt_config else None)
    named = "--prompt-config" if ns.prompt_config else f"{benchmark.declared_by}.prompt_config"  # (a missing file: the benchmark's field, not a flag not given)
    maker = benchmark.row_maker(prompt_step(template, named), agents)
    if not ns.shard:  # what runs, said once (NeMo Gym prints its artifacts too)
        print(f"collect: {'benchmark' if ns.split == 'benchmark' else ns.split + ' dataset'} {benchmark.name} ({benchmark.config}): {ns.input}, {ns.num_repeats} rollouts a row, "
              f"agent {benchmark.routed_agent(agents)}, prompt {template or 'in the rows'}", file=sys.stderr)  # fmt: skip
    return maker


def _suite_rows(ns: argparse.Namespace, suite: Any, agents: dict[str, str]) -> Callable[[dict[str, Any]], tuple[dict[str, Any], bytes | None]]:
    """`--benchmark SUITE.yaml` (`gym eval run` of a config declaring several benchmarks): NeMo
    Gym's collated file of them written beside the output (`--input` given: that file, already
    collated), each line one rollout; each row's agent from `--agent-map`, else the one its
    `task_source` resolves to (dispatch's order); `ns.suite` names each agent's server block."""
    clash = [flag for flag, given in (("--prompt-config", ns.prompt_config), ("--num-repeats", ns.num_repeats)) if given]
    if clash:  # (each benchmark brings its repeats and prompt)
        raise InvalidInputError("an eval suite's benchmarks bring their own", [FieldViolation(flag, "not with a suite's --benchmark") for flag in clash])
    resolved = suite.agent_of(agents)  # (an --agent-map target the config lacks is refused here)
    ns.suite = suite
    ns.suite_agents = sorted(set(resolved.values()))
    if ns.input is None:
        ns.input = ns.output.with_name(ns.output.name.removesuffix(".jsonl") + "_benchmark.jsonl")
        refuse_output_over_input({"--output": ns.output}, [ns.input])
        if not ns.shard:
            lines = suite.collate(ns.input)
            ns.argv = [*ns.argv, "--input", str(ns.input)]  # (--processes' shards read it, not collate it again)
            said = "; ".join(f"{b.name}: {b.num_repeats} rollouts a row, agent {resolved[b.declared_by]}" for b in suite.benchmarks)
            print(f"collect: suite {suite.config}: {len(suite.benchmarks)} benchmarks ({said}), collated into {ns.input} ({lines:,} rollouts)", file=sys.stderr)
    reroute = _rerouted(agents) if agents else None

    def route(row: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
        row = reroute(row) if reroute is not None else row
        if "agent_ref" not in row:
            source = row.get("task_source")
            if source not in resolved:
                raise ValueError(f"{source!r} is none of the suite's benchmarks' ({', '.join(resolved)})", "task_source")
            row = {**row, "agent_ref": {"name": resolved[source]}}
        return row, None

    return route


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


def prompt_step(path: str | None, named: str = "--prompt-config") -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """The row change of `--prompt-config` (NeMo Gym's `+prompt_config`), or of the benchmark's
    own template (`named` in errors), its file read now."""
    from gym_metrics.nemo_gym import prompt_step as step

    return step(path, named)
