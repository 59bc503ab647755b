"""Generation targets: the OpenAI-compatible model and agent clients that `collect` and
`evaluate` call to produce the response they then score.

`parse_target(dict)` / `load_target(path)` read a TARGET.json (`{"type": "model", ...}` or
`{"type": "agent", ...}`); `make_target(config)` gives its client, whose
`await generate(request_or_row)` returns a `Generation` (the answer in Responses API shape,
usage, latency, attempts) or raises `GenerationError`. See docs/targets.md. The multi-turn
agent loop over these clients is `gym_metrics.collector.run_episode`, beside its caller.
"""

from gym_metrics._util.deprecated import old_names
from gym_metrics.targets._capture import Exchange, ModelCalls, capturing, labelled
from gym_metrics.targets._tokens import TOKEN_FIELDS, TokenInfoError, chat_token_fields, token_fields_of
from gym_metrics.targets._client import AgentTarget, Generation, GenerationError, ModelTarget, Usage, make_target
from gym_metrics.targets._config import (
    AgentTargetConfig,
    Inference,
    ModelTargetConfig,
    Reasoning,
    TargetConfig,
    load_target,
    parse_target,
)
from gym_metrics.targets._convert import (
    chat_request_to_responses,
    chat_to_responses,
    output_text,
    output_tool_calls,
    strip_reasoning,
)
from gym_metrics.targets._chat_dialect import ChatConversionError, responses_request_to_chat, text_of
from gym_metrics.targets._budget import ByteBudget

__all__ = [
    "text_of",
    "Exchange",
    "ModelCalls",
    "capturing",
    "labelled",
    "TOKEN_FIELDS",
    "TokenInfoError",
    "chat_token_fields",
    "token_fields_of",
    "AgentTarget",
    "AgentTargetConfig",
    "ByteBudget",
    "Generation",
    "GenerationError",
    "Inference",
    "ModelTarget",
    "ModelTargetConfig",
    "Reasoning",
    "TargetConfig",
    "Usage",
    "chat_request_to_responses",
    "ChatConversionError",
    "chat_to_responses",
    "load_target",
    "make_target",
    "output_text",
    "output_tool_calls",
    "parse_target",
    "responses_request_to_chat",
    "strip_reasoning",
]

__getattr__ = old_names(__name__)  # run_episode and its types moved to gym_metrics.collector
