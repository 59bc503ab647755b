"""NeMo Gym's typed Responses and Chat Completions objects, as ported environments read them:
`body.response.output[i].content[j].text`, `body.response.output_text`,
`body.responses_create_params.input[0].content`, ...

Built on the openai SDK's own models (NeMo Gym builds on them too), so attributes, defaults and
`output_text` behave the same. Items are told apart by `type` (and, for messages, by role and
the fields present) before validation, so an item is never coerced into the wrong model.
Unknown item types (hosted tools: web search, MCP, ...) are kept as they came.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal, Optional, Union

from openai.types.chat import ChatCompletion
from openai.types.responses import Response, ResponseFunctionToolCallOutputItem, ResponseUsage, Tool
from openai.types.responses.response_reasoning_item import Content as ReasoningContent
from openai.types.responses.response_reasoning_item import Summary
from pydantic import BaseModel, ConfigDict, Discriminator, Field, SerializeAsAny, Tag, model_validator

from gym_metrics.nemo_gym._request import RATE_LIMIT_ERROR_CODES, RETRY_ERROR_CODES

Phase = Optional[Literal["commentary", "final_answer"]]
Status = Literal["in_progress", "completed", "incomplete"]


class NeMoGymSummary(Summary):
    pass


class _Item(BaseModel):
    """Items keep fields they do not declare (token ids and log-probs of training rollouts)."""

    model_config = ConfigDict(extra="allow")


class NeMoGymResponseReasoningItem(_Item):
    id: str
    summary: list[NeMoGymSummary]
    type: Literal["reasoning"] = "reasoning"
    encrypted_content: Optional[str] = None
    content: Optional[list[ReasoningContent]] = None


class NeMoGymResponseOutputText(BaseModel):
    annotations: list[Any]
    text: str
    type: Literal["output_text"] = "output_text"
    logprobs: Optional[list[Any]] = None


class NeMoGymResponseOutputRefusal(BaseModel):
    refusal: str
    type: Literal["refusal"] = "refusal"


NeMoGymContent = Annotated[
    Union[NeMoGymResponseOutputText, NeMoGymResponseOutputRefusal], Field(discriminator="type")
]


class NeMoGymResponseOutputMessage(_Item):
    id: str
    content: list[NeMoGymContent]
    role: Literal["assistant"] = "assistant"
    status: Status = "completed"
    type: Literal["message"] = "message"
    phase: Phase = None


class NeMoGymEasyInputMessage(_Item):
    content: Union[str, list[dict[str, Any]]]
    role: Literal["user", "assistant", "system", "developer"]
    type: Literal["message"] = "message"
    phase: Phase = None


class NeMoGymMessage(_Item):
    content: list[dict[str, Any]]
    role: Literal["user", "system", "developer"]
    status: Status = "completed"
    type: Literal["message"] = "message"


class NeMoGymFunctionCallOutput(_Item):
    call_id: str
    output: Union[str, list[dict[str, Any]]]
    type: Literal["function_call_output"] = "function_call_output"
    id: Optional[str] = None
    status: Optional[Status] = None


class NeMoGymResponseFunctionToolCall(_Item):
    arguments: str
    call_id: str
    name: str
    type: Literal["function_call"] = "function_call"
    id: Optional[str] = None
    status: Optional[Status] = None
    namespace: Optional[str] = None


class NeMoGymResponseFunctionCallOutput(ResponseFunctionToolCallOutputItem):
    """A function call's result as a provider returns it in `output`."""


class NeMoGymOtherItem(_Item):
    """An item of a type the models above do not describe (hosted tools), kept as it came."""

    type: str


def _message_tag(item: dict[str, Any]) -> str:
    if item.get("role") == "assistant" and "id" in item and isinstance(item.get("content"), list):
        return "output_message"
    if "status" in item and item.get("role") != "assistant":
        return "input_message"
    return "easy_message"


_KNOWN_TYPES = {"function_call", "function_call_output", "reasoning"}


def _input_tag(item: Any) -> str:
    if type(item) is not dict:  # a model of the union keeps its tag by class, no dump
        if isinstance(item, BaseModel):
            tag = _INPUT_TAGS.get(type(item))
            if tag is not None:
                return tag
            item = item.model_dump(exclude_unset=True)
        if not isinstance(item, dict):
            return "easy_message"
    kind = item.get("type", "message")
    if kind == "message":
        return _message_tag(item)
    return kind if kind in _KNOWN_TYPES else "other"


def _output_tag(item: Any) -> str:
    """Output items are a provider's, but agents also return prompt messages and function
    results (input-shaped: no id) in their trajectories; both are accepted. It runs on every
    item of every validation and serialisation, so the usual case (a dict) goes first."""
    if type(item) is not dict:
        if isinstance(item, BaseModel):
            tag = _OUTPUT_TAGS.get(type(item))
            if tag is not None:
                return tag
            item = item.model_dump(exclude_unset=True)
        if not isinstance(item, dict):
            raise ValueError("Responses API output items must include a type discriminator")
    if "type" not in item:
        raise ValueError("Responses API output items must include a type discriminator")
    kind = item["type"]
    if kind == "message":
        return _message_tag(item)
    if kind == "function_call_output" and item.get("id") is None:
        return "function_call_output_input"
    return kind if kind in _KNOWN_TYPES else "other"


_COMMON_TAGS: dict[type, str] = {
    NeMoGymResponseOutputMessage: "output_message",
    NeMoGymEasyInputMessage: "easy_message",
    NeMoGymMessage: "input_message",
    NeMoGymResponseFunctionToolCall: "function_call",
    NeMoGymResponseReasoningItem: "reasoning",
    NeMoGymOtherItem: "other",
}
_INPUT_TAGS: dict[type, str] = {**_COMMON_TAGS, NeMoGymFunctionCallOutput: "function_call_output"}
_OUTPUT_TAGS: dict[type, str] = {
    **_COMMON_TAGS,
    NeMoGymFunctionCallOutput: "function_call_output_input",
    NeMoGymResponseFunctionCallOutput: "function_call_output",
}
"""Union members by class: an item that is already one of them keeps its tag."""


NeMoGymResponseInputItem = Annotated[
    Union[
        Annotated[NeMoGymEasyInputMessage, Tag("easy_message")],
        Annotated[NeMoGymMessage, Tag("input_message")],
        Annotated[NeMoGymResponseOutputMessage, Tag("output_message")],
        Annotated[NeMoGymResponseFunctionToolCall, Tag("function_call")],
        Annotated[NeMoGymFunctionCallOutput, Tag("function_call_output")],
        Annotated[NeMoGymResponseReasoningItem, Tag("reasoning")],
        Annotated[NeMoGymOtherItem, Tag("other")],
    ],
    Discriminator(_input_tag),
]
NeMoGymResponseInput = list[SerializeAsAny[NeMoGymResponseInputItem]]

NeMoGymResponseOutputItem = Annotated[
    Union[
        Annotated[NeMoGymResponseOutputMessage, Tag("output_message")],
        Annotated[NeMoGymEasyInputMessage, Tag("easy_message")],
        Annotated[NeMoGymMessage, Tag("input_message")],
        Annotated[NeMoGymFunctionCallOutput, Tag("function_call_output_input")],
        Annotated[NeMoGymResponseFunctionToolCall, Tag("function_call")],
        Annotated[NeMoGymResponseFunctionCallOutput, Tag("function_call_output")],
        Annotated[NeMoGymResponseReasoningItem, Tag("reasoning")],
        Annotated[NeMoGymOtherItem, Tag("other")],
    ],
    Discriminator(_output_tag),
]


class NeMoGymResponseCreateParamsNonStreaming(BaseModel):
    """The request that produced a rollout (the Responses API's create parameters). Unknown
    fields are refused, as NeMo Gym's server-side validation refuses them."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _replayed_items(cls, value: Any) -> Any:
        """Output items replayed as input keep only what was set (as a provider sent them)."""
        if isinstance(value, dict):
            items = value.get("input")
            if isinstance(items, list) and any(isinstance(i, BaseModel) for i in items):
                value = {**value, "input": [i.model_dump(exclude_unset=True) if isinstance(i, BaseModel) else i for i in items]}
        return value

    background: Optional[bool] = None
    include: Optional[list[str]] = None
    input: Union[str, NeMoGymResponseInput]
    instructions: Optional[str] = None
    max_output_tokens: Optional[int] = None
    max_tool_calls: Optional[int] = None
    metadata: Optional[dict[str, str]] = None
    model: Optional[str] = None
    parallel_tool_calls: bool = True
    previous_response_id: Optional[str] = None
    prompt: Optional[dict[str, Any]] = None
    reasoning: Optional[dict[str, Any]] = None
    service_tier: Optional[Literal["auto", "default", "flex", "scale", "priority"]] = None
    store: Optional[bool] = None
    context_management: Optional[list[dict[str, Any]]] = None
    conversation: Union[str, dict[str, Any], None] = None
    moderation: Optional[Any] = None
    prompt_cache_key: Optional[str] = None
    prompt_cache_retention: Optional[Literal["in_memory", "24h"]] = None
    safety_identifier: Optional[str] = None
    stream_options: Optional[dict[str, Any]] = None
    temperature: Optional[float] = None
    text: Optional[dict[str, Any]] = None
    tool_choice: Union[str, dict[str, Any]] = "auto"
    tools: list[dict[str, Any]] = Field(default_factory=list)
    top_logprobs: Optional[int] = None
    top_p: Optional[float] = None
    truncation: Optional[Literal["auto", "disabled"]] = None
    user: Optional[str] = None
    stream: Optional[Literal[False]] = None


class NeMoGymResponseInputTokensDetails(BaseModel):
    model_config = ConfigDict(extra="allow")
    cached_tokens: Optional[int] = None


class NeMoGymResponseOutputTokensDetails(BaseModel):
    model_config = ConfigDict(extra="allow")
    reasoning_tokens: Optional[int] = None


class NeMoGymResponseUsage(ResponseUsage):
    """Token counts; details beyond the counts (which providers add over time) are kept."""

    input_tokens_details: NeMoGymResponseInputTokensDetails  # type: ignore[assignment]
    output_tokens_details: NeMoGymResponseOutputTokensDetails  # type: ignore[assignment]


def _sum_known(left: Optional[int], right: Optional[int]) -> Optional[int]:
    """A detail count summed only when both sides report it (unknown stays unknown)."""
    return None if left is None or right is None else left + right


def accumulate_response_usage(total: Optional[NeMoGymResponseUsage], additional: Optional[NeMoGymResponseUsage]) -> Optional[NeMoGymResponseUsage]:
    """`total` plus `additional` (a multi-call agent's usage): the three counts summed, the cached
    and reasoning details summed where both calls report them; `total` itself is left alone."""
    if additional is None:
        return total
    if total is None:
        return additional.model_copy(deep=True)
    out = total.model_copy(deep=True)
    out.input_tokens += additional.input_tokens
    out.output_tokens += additional.output_tokens
    out.total_tokens += additional.total_tokens
    if out.input_tokens_details is not None and additional.input_tokens_details is not None:
        out.input_tokens_details.cached_tokens = _sum_known(out.input_tokens_details.cached_tokens, additional.input_tokens_details.cached_tokens)
    if out.output_tokens_details is not None and additional.output_tokens_details is not None:
        out.output_tokens_details.reasoning_tokens = _sum_known(out.output_tokens_details.reasoning_tokens, additional.output_tokens_details.reasoning_tokens)
    return out


def _by_type(annotated: Any) -> Any:
    """openai's `type`-tagged union as a pydantic tagged union: the member is picked by its
    `type` instead of trying all of them (openai's own tag is invisible to pydantic, and trying
    15 tool models on every tool was most of the time spent validating a tool-calling
    rollout). Anything the tag does not name exactly (no `type`, an unknown or shared one) is
    validated by the original union, so results and errors are openai's."""
    members = typing.get_args(typing.get_args(annotated)[0])
    by_tag: dict[str, Any] = {}
    for member in members:
        for tag in typing.get_args(member.model_fields["type"].annotation):
            by_tag[tag] = None if tag in by_tag else member  # a tag two members share: no shortcut
    by_tag = {tag: member for tag, member in by_tag.items() if member is not None}
    by_class = {member: tag for tag, member in by_tag.items()}
    fallback = typing.get_args(annotated)[0]

    def tag_of(value: Any) -> str:
        if isinstance(value, BaseModel):
            return by_class.get(type(value), "_any")
        kind = value.get("type") if isinstance(value, dict) else None
        return kind if kind in by_tag else "_any"

    tagged = [Annotated[member, Tag(tag)] for tag, member in by_tag.items()]
    return Annotated[Union[tuple([*tagged, Annotated[fallback, Tag("_any")]])], Discriminator(tag_of)]


NeMoGymTool = _by_type(Tool)


class NeMoGymResponse(Response):
    """A model's response: openai's Response (its `output_text` included) with typed items.
    Items and tools serialise as the models they are (SerializeAsAny), without asking the
    discriminator again per item: a third less time dumping a tool-calling response."""

    output: list[SerializeAsAny[NeMoGymResponseOutputItem]]  # type: ignore[assignment]
    tools: list[SerializeAsAny[NeMoGymTool]]  # type: ignore[valid-type]
    usage: Optional[NeMoGymResponseUsage] = None



class TokenIDLogProbMixin(BaseModel):
    """The token IDs and log-probs a training rollout's item carries (`routed_experts`: MoE routing)."""

    prompt_token_ids: list[int]
    generation_token_ids: list[int]
    generation_log_probs: list[float]
    routed_experts: Optional[Union[str, list[list[list[int]]]]] = None


REQUIRED_TOKEN_METADATA_FIELDS = frozenset({"prompt_token_ids", "generation_token_ids", "generation_log_probs"})
TOKEN_METADATA_FIELDS = REQUIRED_TOKEN_METADATA_FIELDS | {"routed_experts"}


class NeMoGymEasyInputMessageForTraining(NeMoGymEasyInputMessage, TokenIDLogProbMixin): ...


class NeMoGymMessageForTraining(NeMoGymMessage, TokenIDLogProbMixin): ...


class NeMoGymResponseOutputMessageForTraining(NeMoGymResponseOutputMessage, TokenIDLogProbMixin): ...


class NeMoGymResponseFunctionToolCallForTraining(NeMoGymResponseFunctionToolCall, TokenIDLogProbMixin): ...


class NeMoGymResponseReasoningItemForTraining(NeMoGymResponseReasoningItem, TokenIDLogProbMixin): ...


RESPONSES_TO_TRAIN: dict[type, type] = {
    NeMoGymEasyInputMessage: NeMoGymEasyInputMessageForTraining,
    NeMoGymMessage: NeMoGymMessageForTraining,
    NeMoGymResponseOutputMessage: NeMoGymResponseOutputMessageForTraining,
    NeMoGymResponseFunctionToolCall: NeMoGymResponseFunctionToolCallForTraining,
    NeMoGymResponseReasoningItem: NeMoGymResponseReasoningItemForTraining,
}
"""Each item model that can carry token IDs, and its variant that declares them."""


def training_variant_of(item_cls: type) -> type:
    """The ForTraining variant of an item model (NotImplementedError naming it when it has none)."""
    if item_cls not in RESPONSES_TO_TRAIN:
        raise NotImplementedError(f"{item_cls.__name__} has no ForTraining variant, so token IDs and logprobs cannot be attached to it")
    return RESPONSES_TO_TRAIN[item_cls]


NeMoGymChatCompletionMessageParam = dict[str, Any]
"""A chat message as a request carries it (NeMo Gym's union of the SDK's message params)."""

class NeMoGymChatCompletion(ChatCompletion):
    pass


class NeMoGymChatCompletionCreateParamsNonStreaming(BaseModel):
    """A Chat Completions request (what a judge or policy model is sent): NeMo Gym's fields and
    defaults (unknown fields refused), so an environment that keeps one in its verify answer
    (gdp_pdf's criterion evaluations) dumps what NeMo Gym dumps. The SDK's param types are
    open mappings here."""

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]]
    model: Optional[str] = None
    audio: Optional[dict[str, Any]] = None
    frequency_penalty: Optional[float] = None
    logit_bias: Optional[dict[str, int]] = None
    logprobs: Optional[bool] = None
    max_completion_tokens: Optional[int] = None
    max_tokens: Optional[int] = None
    metadata: Optional[dict[str, str]] = None
    moderation: Optional[Any] = None
    modalities: Optional[list[Literal["text", "audio"]]] = None
    n: Optional[int] = None
    parallel_tool_calls: bool = True
    prediction: Optional[dict[str, Any]] = None
    presence_penalty: Optional[float] = None
    prompt_cache_key: Optional[str] = None
    prompt_cache_retention: Optional[Literal["in_memory", "24h"]] = None
    reasoning_effort: Optional[str] = None
    response_format: Optional[dict[str, Any]] = None
    seed: Optional[int] = None
    safety_identifier: Optional[str] = None
    service_tier: Optional[Literal["auto", "default", "flex", "scale", "priority"]] = None
    stop: Union[Optional[str], list[str], None] = None
    store: Optional[bool] = None
    stream_options: Optional[dict[str, Any]] = None
    temperature: Optional[float] = None
    tool_choice: Optional[Union[str, dict[str, Any]]] = None
    tools: Optional[list[dict[str, Any]]] = None
    top_logprobs: Optional[int] = None
    top_p: Optional[float] = None
    user: Optional[str] = None
    verbosity: Optional[Literal["low", "medium", "high"]] = None
    web_search_options: Optional[dict[str, Any]] = None
    stream: Optional[Literal[False]] = None
    chat_template_kwargs: Optional[dict[str, Any]] = None
    thinking: Optional[dict[str, Any]] = None
    output_config: Optional[dict[str, Any]] = None


def __getattr__(name: str) -> Any:
    """`NeMoGymAsyncOpenAI` and `PermanentEndpointError` (an HTTP client: imported when asked for)."""
    if name in ("NeMoGymAsyncOpenAI", "PermanentEndpointError"):
        from gym_metrics.nemo_gym import _async_openai

        return getattr(_async_openai, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "RATE_LIMIT_ERROR_CODES",
    "RETRY_ERROR_CODES",
    "NeMoGymChatCompletion",
    "NeMoGymChatCompletionCreateParamsNonStreaming",
    "NeMoGymChatCompletionMessageParam",
    "NeMoGymContent",
    "NeMoGymEasyInputMessage",
    "NeMoGymFunctionCallOutput",
    "NeMoGymMessage",
    "NeMoGymOtherItem",
    "NeMoGymResponse",
    "NeMoGymResponseCreateParamsNonStreaming",
    "NeMoGymResponseFunctionCallOutput",
    "NeMoGymResponseFunctionToolCall",
    "NeMoGymResponseInput",
    "NeMoGymResponseInputTokensDetails",
    "NeMoGymResponseInputItem",
    "NeMoGymResponseOutputItem",
    "NeMoGymResponseOutputMessage",
    "NeMoGymResponseOutputRefusal",
    "NeMoGymResponseOutputText",
    "NeMoGymResponseOutputTokensDetails",
    "NeMoGymResponseReasoningItem",
    "NeMoGymResponseUsage",
    "accumulate_response_usage",
    "NeMoGymSummary",
    "RESPONSES_TO_TRAIN",
    "TOKEN_METADATA_FIELDS",
    "TokenIDLogProbMixin",
    "training_variant_of",
    "NeMoGymEasyInputMessageForTraining",
    "NeMoGymMessageForTraining",
    "NeMoGymResponseOutputMessageForTraining",
    "NeMoGymResponseFunctionToolCallForTraining",
    "NeMoGymResponseReasoningItemForTraining",
]
