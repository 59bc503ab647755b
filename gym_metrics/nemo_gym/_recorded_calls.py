"""simple_agent's policy calls as NeMo Gym's model server records them (`ng_model_call_capture`
with payloads, which its collection projects into `ng_trajectory`): the body as the agent sent it
(its row's request, the conversation so far: earlier answers' items as the server's typed model
dumps them, the tool outputs as the agent built them; no `model`, which the server adds upstream)
and the answer as the server's typed model dumps it (every field, nulls too)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson


def _key(item: Any) -> bytes:
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


def as_recorded(records: Sequence[Mapping[str, Any]], request: Mapping[str, Any], relayed: bool = False) -> list[dict[str, Any]]:
    """`records` (collect's captured calls of one episode, payloads in, in call order) as NeMo
    Gym's model server records simple_agent's calls of that episode; `request` is the row's
    `responses_create_params`, which `relayed` records as it is (tool_simulation_agent posts it
    unchanged, a string `input` too). A record whose answer the typed model refuses keeps it as
    it came."""
    from gym_metrics.nemo_gym.openai_utils import NeMoGymResponse  # (openai's models: loaded for NeMo Gym rows only)

    given = request.get("input")
    first = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or ())
    typed_items: dict[bytes, Any] = {}
    out = []
    for record in records:
        record = dict(record)
        sent = record.get("request")
        if relayed:
            record["request"] = dict(request)
        elif isinstance(sent, Mapping) and isinstance(sent.get("input"), list):
            later = [typed_items.get(_key(item), item) for item in sent["input"][len(first) :]]
            record["request"] = {**request, "input": [*first, *later]}
        answer = record.get("response")
        if isinstance(answer, Mapping):
            try:
                typed = NeMoGymResponse.model_validate(answer).model_dump(mode="json")
            except Exception:  # noqa: BLE001 - kept as it came
                typed = None
            if typed is not None:
                for raw, dumped in zip(answer.get("output") or (), typed.get("output") or ()):
                    typed_items[_key(raw)] = dumped
                record["response"] = typed
        out.append(record)
    return out


__all__ = ["as_recorded"]
