"""Several environments in one collect (`--server AGENT=HOST:PORT`): each agent's rollouts go to
its own resources server, as NeMo Gym routes a row through its agent to that agent's resources
server (a training mix of environments, an eval suite). Each environment (a distinct set of
addresses) is collected by a shard process of its own (collector/_processes.py), so one slow
environment does not hold the others' event loop; the shards' rows are merged and each agent
aggregated by its own environment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gym_metrics.errors import FieldViolation, InvalidInputError


def split_server(text: str) -> tuple[str | None, str]:
    """(agent, address) of one `--server` value: `AGENT=ADDRESS`, or a plain address (agent
    None). An address never holds `=` before a `:` or `/`, so `unix:/a=b` stays an address."""
    agent, eq, address = text.partition("=")
    if eq and agent and ":" not in agent and "/" not in agent:
        return agent, address
    return None, text


@dataclass(frozen=True)
class Environments:
    """Which servers each agent's rollouts go to: environment `i` is `servers[i]` (replicas of
    one server), agents named by `of_agent`, every other agent to `default` (None: none given)."""

    servers: tuple[tuple[str, ...], ...]
    of_agent: Mapping[str, int] = field(default_factory=dict)
    default: int | None = None

    @classmethod
    def parse(cls, given: Sequence[str]) -> Environments | None:
        """The environments of `--server` values (module docstring); None when no value names an
        agent (one environment, collected as before)."""
        pairs = [split_server(text) for text in given]
        if all(agent is None for agent, _ in pairs):
            return None
        by_agent: dict[str | None, list[str]] = {}
        for agent, address in pairs:
            by_agent.setdefault(agent, []).append(address)
        servers: list[tuple[str, ...]] = []
        index: dict[tuple[str, ...], int] = {}

        def of(addresses: list[str]) -> int:
            key = tuple(addresses)
            if key not in index:
                index[key] = len(servers)
                servers.append(key)
            return index[key]

        default = of(by_agent.pop(None)) if None in by_agent else None
        of_agent = {agent: of(addresses) for agent, addresses in by_agent.items() if agent is not None}
        return cls(tuple(servers), of_agent, default)

    def index(self, agent: str) -> int | None:
        return self.of_agent.get(agent, self.default)

    def require(self, agent: str, where: str) -> int:
        """The environment of `agent`; InvalidInputError naming it and `where` when no --server
        serves it (its rollouts would be collected by no one)."""
        found = self.index(agent)
        if found is None:
            named = ", ".join(sorted(self.of_agent))
            raise InvalidInputError(f"no server for agent {agent}", [FieldViolation("--server", f"{where}: agent {agent!r} has none "
                                    f"(servers are given for {named}): add --server {agent}=HOST:PORT, or a plain --server for every other agent")])  # fmt: skip
        return found

    def agents(self, index: int) -> str:
        """Environment `index` in words, for logs: its agents and addresses."""
        names = sorted(a for a, i in self.of_agent.items() if i == index) + (["every other agent"] if self.default == index else [])
        return f"{', '.join(names)} on {', '.join(self.servers[index])}"


__all__ = ["Environments", "split_server"]
