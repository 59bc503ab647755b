"""The policy flags of `collect` (and `serve`'s agent door): the model target a rollout is
generated with, the agent loop's bounds, what is recorded; and the target config they make."""

from __future__ import annotations

import argparse
import os
from typing import Any

from gym_metrics.cli._base import non_negative_int, positive_float, positive_int
from gym_metrics.errors import FieldViolation, InvalidInputError


def add_policy_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("generation", "generate each rollout with a policy model first (rows with neither reward nor response)")
    add_policy_target_flags(g)
    loop = g.add_mutually_exclusive_group()
    loop.add_argument(
        "--agent-loop", dest="agent_loop", action="store_true", default=None,
        help="run each row as a multi-turn episode with the environment's tools (default: when it has tools)",
    )  # fmt: skip
    loop.add_argument("--no-agent-loop", dest="agent_loop", action="store_false", help="one policy call per row, even with tools")
    g.add_argument("--max-steps", type=positive_int, metavar="N", help="policy calls one episode may make (default: no limit)")
    g.add_argument(
        "--num-repeats-add-seed", action="store_true",
        help="each rollout's index as its seed, in its request's metadata.extra_body (NeMo Gym's num_repeats_add_seed; "
        "a chat endpoint gets it in the body, as NeMo Gym's vLLM server sends it)",
    )  # fmt: skip
    g.add_argument(
        "--parallel-tool-calls", action="store_true",
        help="run the tool calls of one turn concurrently (default: one after another, in the model's order, as NeMo Gym does)",
    )  # fmt: skip
    g.add_argument(
        "--capture-model-calls", action="store_true",
        help="record every policy call on its row as NeMo Gym's ng_model_call_capture (status, timing, tokens, "
        "finish reason, error category; docs/pipelines.md#recording)",
    )  # fmt: skip
    g.add_argument("--capture-payloads", action="store_true", help="with --capture-model-calls: keep each call's request and answer too")
    g.add_argument(
        "--capture-tokens", action="store_true",
        help="ask the policy (vLLM chat) for token IDs and log-probs, write them on each turn's last output item as NeMo Gym does, "
        "and check them (gaps recorded and counted); turns --capture-model-calls and --trajectory on",
    )  # fmt: skip
    g.add_argument(
        "--health", action="store_true",
        help="after collecting, run NeMo Gym's rollout health checks over the rollouts: quality_summary.json and "
        "rollout_verdicts.jsonl beside them, the counts per agent in the metrics file (`health`), and the one-line report (docs/health.md)",
    )  # fmt: skip
    g.add_argument(
        "--trajectory", action="store_true",
        help="write each generated rollout's ng_trajectory (NeMo Gym's TrajectoryRecord: turns, model calls, tool calls, gaps); "
        "turns --capture-model-calls on",
    )  # fmt: skip


def add_policy_target_flags(g: Any) -> None:
    """The `--policy-*` flags of a policy target (collect's generation, serve's /run door)."""
    g.add_argument("--policy-url", metavar="URL", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--policy-model", metavar="NAME", help="model name sent in every request")
    g.add_argument("--policy-api", choices=["chat", "responses"], help="endpoint called (default chat)")
    g.add_argument("--policy-key-env", metavar="VAR", help="environment variable holding the API key")
    g.add_argument("--temperature", type=float, metavar="T", help="override the requests' temperature")
    g.add_argument("--top-p", type=float, metavar="P", help="override the requests' top_p")
    g.add_argument("--max-tokens", type=int, metavar="N", help="override the requests' max output tokens")
    g.add_argument("--seed", type=int, metavar="S", help="sampling seed sent with every request (all repeats alike)")
    # (their defaults are filled by policy_config: a value left None is one not given, refused without --policy-url)
    g.add_argument("--policy-concurrency", type=positive_int, metavar="N", help=f"generations in flight ({POLICY_DEFAULTS['policy_concurrency']})")
    g.add_argument("--policy-timeout", type=positive_float, metavar="S", help=f"seconds per attempt ({POLICY_DEFAULTS['policy_timeout']:g})")
    g.add_argument("--policy-max-retries", type=non_negative_int, metavar="N", help=f"retries per generation ({POLICY_DEFAULTS['policy_max_retries']})")


_POLICY_FLAGS = {
    "url": "--policy-url", "model": "--policy-model", "api_key_env": "--policy-key-env",
    "inference.temperature": "--temperature", "inference.top_p": "--top-p",
    "inference.max_tokens": "--max-tokens", "inference.seed": "--seed",
}  # fmt: skip
_SAMPLING = ("temperature", "top_p", "max_tokens", "seed")
POLICY_DEFAULTS: dict[str, Any] = {"policy_api": "chat", "policy_concurrency": 64, "policy_timeout": 300.0, "policy_max_retries": 3}
"""The values of the `--policy-*` flags not given (their parser default is None: given or not is seen)."""
_TARGET_FLAGS = ("policy_url", "policy_model", "policy_key_env", "policy_api", *_SAMPLING, *(k for k in POLICY_DEFAULTS if k != "policy_api"))


def policy_flags_given(ns: argparse.Namespace) -> list[str]:
    """The `--policy-*` and sampling flags given (each configures the policy target, and only that)."""
    return [f"--{n.replace('_', '-')}" for n in _TARGET_FLAGS if getattr(ns, n, None) is not None]


GENERATION_ONLY = ("--agent-loop", "--max-steps", "--parallel-tool-calls", "--capture-model-calls", "--capture-payloads",
                    "--capture-tokens", "--trajectory", "--num-repeats-add-seed")  # fmt: skip
"""Flags that only act on rollouts collect generates: without --policy-url they did nothing,
silently (health then found every rollout unobserved)."""


def policy_config(ns: argparse.Namespace) -> Any:
    """The ModelTargetConfig of the `--policy-*` flags (None without --policy-url);
    InvalidInputError naming the flag of a bad value."""
    from gym_metrics.errors import FieldViolation, InvalidInputError
    from gym_metrics.targets import parse_target

    if ns.policy_url is None:
        given = policy_flags_given(ns)
        if given:
            raise InvalidInputError(f"{', '.join(given)} need --policy-url", [FieldViolation("--policy-url", "not given")])
        return None
    if ns.policy_model is None:
        raise InvalidInputError("--policy-url needs --policy-model", [FieldViolation("--policy-model", "not given")])
    if ns.policy_key_env is not None and not os.environ.get(ns.policy_key_env):
        raise InvalidInputError("policy API key not found", [FieldViolation("--policy-key-env", f"{ns.policy_key_env} is not set or empty")])
    value = {k: default if getattr(ns, k, None) is None else getattr(ns, k) for k, default in POLICY_DEFAULTS.items()}
    data = {
        "type": "model", "url": ns.policy_url, "model": ns.policy_model, "api": value["policy_api"],
        "api_key_env": ns.policy_key_env, "inference": {k: getattr(ns, k) for k in _SAMPLING},
        "timeout_seconds": value["policy_timeout"], "max_retries": value["policy_max_retries"],
        "max_concurrency": value["policy_concurrency"],
    }  # fmt: skip
    try:
        return parse_target(data, source="policy")
    except InvalidInputError as exc:
        named = [FieldViolation(_POLICY_FLAGS.get(v.field.removeprefix("policy."), v.field), v.description) for v in exc.violations]
        raise InvalidInputError("bad --policy-* flags", named) from None
