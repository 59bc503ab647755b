"""NeMo RL: an environment (the `EnvironmentInterface` shape) whose rewards a gym-metrics server gives.

Register it as any NeMo RL environment, a Ray actor made from its config dict:

    from nemo_rl.distributed.ray_actor_environment_registry import ACTOR_ENVIRONMENT_REGISTRY
    from nemo_rl.distributed.virtual_cluster import PY_EXECUTABLES
    from nemo_rl.environments.utils import create_env, register_env

    FQN = "gym_metrics.integrations.nemo_rl.GymMetricsEnvironmentActor"
    ACTOR_ENVIRONMENT_REGISTRY[FQN] = PY_EXECUTABLES.SYSTEM
    register_env("gym_metrics", FQN)
    env = create_env("gym_metrics", {"server": "127.0.0.1:50051"})   # task_to_env={"math": env}

`step(message_log_batch, metadata)` scores the last assistant message of each message log as
one batched call; each sample's metadata (`extra_env_info`) is its task row: a row with
`responses_create_params` (NeMo Gym's data) is sent as it is, otherwise its `label_key`
(default `ground_truth`, as in NeMo RL's math data) is the label and its other keys the row's
columns, the messages before the answer its prompt. Rewards come back as a float32 torch tensor
(a list where torch is missing), every episode ends (`terminateds` all ones) and the
observation says so. A completion that cannot be scored raises a RewardFailure out of `step`
(NeMo RL trains on every reward it gets: a made-up 0 or a NaN would be trained on);
`on_failure: nan` or `zero` in the config choose otherwise. The object keeps only its config,
so it pickles. Nothing of NeMo RL, Ray or torch is imported at load.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from gym_metrics.integrations._client import reward_client
from gym_metrics.integrations._mapping import OnFailure, RowMapping, check_lengths, check_on_failure, settle


class EnvironmentReturn(NamedTuple):
    """NeMo RL's `EnvironmentReturn`, field for field (NeMo RL unpacks it as a tuple)."""

    observations: list[dict[str, str]]
    metadata: list[Any]
    next_stop_strings: list[list[str] | None] | list[None]
    rewards: Any
    """A float32 torch tensor [B] (a list of floats without torch)."""
    terminateds: Any
    answers: list[str | None] | None


class GymMetricsEnvironment:
    """See the module docstring. `cfg`: `server` (HOST:PORT), and optionally `token`,
    `on_failure` ("raise", "nan", "zero"), `label_key`, `answer_field`, `columns`, `timeout_s`."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = dict(cfg)
        if not self.cfg.get("server"):
            raise ValueError("the gym-metrics environment's config needs `server` (HOST:PORT)")
        self.server: str = str(self.cfg["server"])
        self.token: str | None = self.cfg.get("token")
        self.timeout_s: float | None = self.cfg.get("timeout_s")
        self.on_failure: OnFailure = check_on_failure(self.cfg.get("on_failure", "raise"), ("raise", "nan", "zero"), "NeMo RL")
        self.label_key: str = self.cfg.get("label_key", "ground_truth")
        columns = self.cfg.get("columns")
        self.mapping = RowMapping(answer_field=self.cfg.get("answer_field", "expected_answer"), columns=list(columns) if columns is not None else None)
        self.failed = 0

    def __getstate__(self) -> dict[str, Any]:
        return {"cfg": self.cfg}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["cfg"])  # type: ignore[misc]

    def step(self, message_log_batch: Sequence[Sequence[Mapping[str, Any]]], metadata: Sequence[Any]) -> EnvironmentReturn:
        """Score the last assistant message of each log (NeMo RL's `EnvironmentInterface.step`);
        a ValueError when the logs and the metadata differ in number (zip scored the fewer,
        answering fewer rewards than samples, without a word)."""
        check_lengths("step", message_logs=message_log_batch, metadata=metadata)
        groups = [self.group(log, meta) for log, meta in zip(message_log_batch, metadata)]
        scored = reward_client(self.server, token=self.token, timeout_s=self.timeout_s).score(groups)
        rewards: list[float] = []
        observations: list[dict[str, str]] = []
        for group in scored:
            (reward,) = settle(group.rewards, group.failed, group.errors, self.on_failure)
            self.failed += group.failed[0]
            rewards.append(float("nan") if reward is None else reward)
            note = f"not scored: {group.errors[0]}" if group.failed[0] else f"reward {rewards[-1]:g}"
            observations.append({"role": "environment", "content": f"Environment: episode ended, {note}"})
        n = len(rewards)
        return EnvironmentReturn(observations, list(metadata), [None] * n, _tensor(rewards), _tensor([1.0] * n), None)

    def group(self, message_log: Sequence[Mapping[str, Any]], metadata: Any) -> tuple[dict[str, Any], list[Any]]:
        """One sample's (task row, [its answer])."""
        last = max((i for i, m in enumerate(message_log) if m.get("role") == "assistant"), default=len(message_log))
        answer = self.mapping.completion([dict(message_log[last])]) if last < len(message_log) else ""
        meta = dict(metadata) if isinstance(metadata, Mapping) else {}
        if isinstance(meta.get("responses_create_params"), Mapping):
            return meta, [answer]
        label = meta.pop(self.label_key, None)
        prompt = [{"role": str(m.get("role")), "content": m.get("content")} for m in message_log[:last]]
        return self.mapping.row(prompt, label=label, columns=meta), [answer]

    def global_post_process_and_metrics(self, batch: Any) -> tuple[Any, dict[str, float | int]]:
        """The batch as it is, and its mean reward, ended fraction and the failures since the last call."""
        rewards = batch["rewards"]
        n = len(rewards)
        metrics: dict[str, float | int] = {"mean_reward": float(sum(float(r) for r in rewards) / n) if n else 0.0, "num_samples": n}
        if "is_end" in batch:
            metrics["fraction_of_samples_properly_ended"] = float(sum(float(e) for e in batch["is_end"]) / n) if n else 0.0
        metrics["gym_metrics_failed_completions"], self.failed = self.failed, 0
        return batch, metrics

    def shutdown(self) -> None:
        """Nothing to stop: the process's reward client is shared."""


def _tensor(values: list[float]) -> Any:
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return values
    return torch.tensor(values, dtype=torch.float32)


def actor_class(**options: Any) -> Any:
    """`GymMetricsEnvironment` as a Ray actor class (`ray.remote(**options)`; by default as
    NeMo RL's own environments: restarted on failure, concurrent calls allowed)."""
    import ray

    options = {"max_restarts": -1, "max_task_retries": -1, "max_concurrency": 1000, **options}
    return ray.remote(**options)(GymMetricsEnvironment)


def __getattr__(name: str) -> Any:
    if name == "GymMetricsEnvironmentActor":  # made on first use, so loading imports no Ray
        cls = actor_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EnvironmentReturn", "GymMetricsEnvironment", "actor_class"]
