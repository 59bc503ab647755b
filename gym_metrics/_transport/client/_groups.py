"""ScoreGroups from the client: groups of completions in, each group's rewards out, every
failure flagged beside its reward."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc.aio
import orjson

from gym_metrics._util.jsonio import unencodable
from gym_metrics._transport._verified import ERROR_KINDS
from gym_metrics._transport.client._sessions import json_text, session_error
from gym_metrics.v1 import resources_pb2 as pb


@dataclass(frozen=True)
class GroupRewards:
    """One group's scores, position i for completion i."""

    rewards: list[float]
    failed: list[bool]
    error_kind: list[str | None]
    error_message: list[str]
    response_json: list[str]
    """Empty where failed, or when the call omitted responses."""

    def responses(self) -> list[dict[str, Any] | None]:
        """The verify responses, parsed (None where there is none)."""
        return [orjson.loads(text) if text else None for text in self.response_json]


def completion_json(completion: Any) -> str:
    """A completion as the wire carries it: a text (JSON string) or a Responses object."""
    if isinstance(completion, bytes):
        return completion.decode()
    return orjson.dumps(completion, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def encoded_group(row: Mapping[str, Any] | str | bytes, completions: Sequence[Any]) -> pb.CompletionGroup:
    """One group as ScoreGroups carries it (`.ByteSize()` its size); TypeError naming the part
    JSON cannot hold (`row["extra_info"]["raw"]: bytes`, `completion 2: set`)."""
    try:
        row_json = json_text(row)
    except TypeError:
        raise TypeError(f"the task row holds what JSON cannot: {unencodable(row, 'row')}") from None
    texts = []
    for i, completion in enumerate(completions):
        try:
            texts.append(completion_json(completion))
        except TypeError:
            raise TypeError(f"completion {i} holds what JSON cannot: {unencodable(completion, f'completion {i}')}") from None
    return pb.CompletionGroup(row_json=row_json, completion_json=texts)


class GroupCalls:
    """Mixed into ResourcesClient (which sets `_stub` and `_metadata`)."""

    _stub: Any
    _metadata: Any

    async def score_groups(
        self,
        groups: Sequence[tuple[Mapping[str, Any] | str | bytes, Sequence[Any]] | pb.CompletionGroup],
        *,
        omit_responses: bool = False,
        sessions: Sequence[Sequence[str]] | None = None,
        timeout: float | None = None,
    ) -> list[GroupRewards]:
        """Score `(task row, completions)` groups; a completion is its text or a Responses
        object, or the group already encoded (`encoded_group`). `sessions` (one id per
        completion per group) verifies each in its session."""
        request = pb.ScoreGroupsRequest(omit_responses=omit_responses)
        for g, group in enumerate(groups):
            if not isinstance(group, pb.CompletionGroup):
                group = encoded_group(*group)
            if sessions:
                group.session_id[:] = list(sessions[g])
            request.groups.append(group)
        try:
            answer = await self._stub.ScoreGroups(request, metadata=self._metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise session_error(exc) from None
        kinds = ERROR_KINDS.get
        return [
            GroupRewards(list(s.rewards), list(s.failed), [kinds(k, "unknown") for k in s.error_kind], list(s.error_message), list(s.response_json))
            for s in answer.groups
        ]
