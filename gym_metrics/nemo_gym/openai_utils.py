"""NeMo Gym's typed Responses and Chat Completions objects, as ported environments read them:
`body.response.output[i].content[j].text`, `body.response.output_text`,
`body.responses_create_params.input[0].content`, ...

Built on the openai SDK's own models (NeMo Gym builds on them too), so attributes, defaults and
`output_text` behave the same. The items (told apart by `type` before validation, unknown types
kept as they came) and their ForTraining variants are `_items.py`'s, re-exported here.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal, Optional, Union

from openai.types.responses import Response, ResponseUsage, Tool
from openai.types.responses.response_conversation_param_param import ResponseConversationParamParam
from openai.types.responses.response_create_params import (
    ContextManagement,
    Metadata,
    Moderation,
    Reasoning,
    ResponseIncludable,
    ResponsePromptParam,
    ResponsesModel,
    ResponseTextConfigParam,
    StreamOptions,
    ToolChoice,
    ToolParam,
)
from pydantic import BaseModel, ConfigDict, Discriminator, Field, SerializeAsAny, Tag, model_validator

from gym_metrics.nemo_gym._chat import (
    CHAT_REQUEST_PROVIDER_EXTENSION_FIELDS,
    NeMoGymChatCompletion,
    NeMoGymChatCompletionAssistantMessageForTrainingParam,
    NeMoGymChatCompletionAssistantMessageParam,
    NeMoGymChatCompletionContentPartFileParam,
    NeMoGymChatCompletionContentPartImageParam,
    NeMoGymChatCompletionContentPartInputAudioParam,
    NeMoGymChatCompletionContentPartParam,
    NeMoGymChatCompletionContentPartTextParam,
    NeMoGymChatCompletionContentPartVideoUrlParam,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymChatCompletionCustomToolParam,
    NeMoGymChatCompletionDeveloperMessageParam,
    NeMoGymChatCompletionMessage,
    NeMoGymChatCompletionMessageCustomToolCall,
    NeMoGymChatCompletionMessageCustomToolCallParam,
    NeMoGymChatCompletionMessageForTraining,
    NeMoGymChatCompletionMessageParam,
    NeMoGymChatCompletionMessageToolCall,
    NeMoGymChatCompletionMessageToolCallFunctionParam,
    NeMoGymChatCompletionMessageToolCallParam,
    NeMoGymChatCompletionMessageToolCallsParam,
    NeMoGymChatCompletionMessageToolCallUnion,
    NeMoGymChatCompletionMessageToolCallUnionParam,
    NeMoGymChatCompletionOutputMessage,
    NeMoGymChatCompletionSystemMessageParam,
    NeMoGymChatCompletionToolMessageParam,
    NeMoGymChatCompletionToolParam,
    NeMoGymChatCompletionToolUnionParam,
    NeMoGymChatCompletionUserMessageParam,
    NeMoGymChoice,
    NeMoGymFunction,
    NeMoGymFunctionDefinition,
    NeMoGymInputAudio,
    TokenIDLogProbTypedDictMixin,
)
from gym_metrics.nemo_gym._items import (
    REQUIRED_TOKEN_METADATA_FIELDS,
    RESPONSES_TO_TRAIN,
    TOKEN_METADATA_FIELDS,
    NeMoGymContent,
    NeMoGymEasyInputMessage,
    NeMoGymEasyInputMessageForTraining,
    NeMoGymFunctionCallOutput,
    NeMoGymMessage,
    NeMoGymMessageForTraining,
    NeMoGymOtherItem,
    NeMoGymResponseFunctionCallOutput,
    NeMoGymResponseFunctionToolCall,
    NeMoGymResponseFunctionToolCallForTraining,
    NeMoGymResponseInput,
    NeMoGymResponseInputItem,
    NeMoGymResponseOutputItem,
    NeMoGymResponseOutputMessage,
    NeMoGymResponseOutputMessageForTraining,
    NeMoGymResponseOutputRefusal,
    NeMoGymResponseOutputText,
    NeMoGymResponseReasoningItem,
    NeMoGymResponseReasoningItemForTraining,
    NeMoGymSummary,
    TokenIDLogProbMixin,
    training_variant_of,
)
from gym_metrics.nemo_gym._request import RATE_LIMIT_ERROR_CODES, RETRY_ERROR_CODES

def _replayed_tool(tool: Any) -> Any:
    if isinstance(tool, BaseModel):
        tool = tool.model_dump()
    if isinstance(tool, dict) and "defer_loading" in tool and tool["defer_loading"] is None:
        tool = {**tool, "defer_loading": False}
    return tool


class NeMoGymResponseCreateParamsNonStreaming(BaseModel):
    """The request that produced a rollout (the Responses API's create parameters). Unknown
    fields are refused, as NeMo Gym's server-side validation refuses them."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _replayed_items(cls, value: Any) -> Any:
        """Output items replayed as input keep only what was set (as a provider sent them); a
        response's tools replayed are plain again, a `defer_loading` of null false (a response
        says null where a request may only say true or false)."""
        if isinstance(value, dict):
            items = value.get("input")
            if isinstance(items, list) and any(isinstance(i, BaseModel) for i in items):
                value = {**value, "input": [i.model_dump(exclude_unset=True) if isinstance(i, BaseModel) else i for i in items]}
            tools = value.get("tools")
            if isinstance(tools, list) and any(isinstance(t, BaseModel) or (isinstance(t, dict) and t.get("defer_loading", False) is None) for t in tools):
                value = {**value, "tools": [_replayed_tool(t) for t in tools]}
        return value

    background: Optional[bool] = None
    include: Optional[list[ResponseIncludable]] = None
    input: Union[str, NeMoGymResponseInput]
    instructions: Optional[str] = None
    max_output_tokens: Optional[int] = None
    max_tool_calls: Optional[int] = None
    metadata: Optional[Metadata] = None
    model: Optional[ResponsesModel] = None
    parallel_tool_calls: bool = True
    previous_response_id: Optional[str] = None
    prompt: Optional[ResponsePromptParam] = None
    reasoning: Optional[Reasoning] = None
    service_tier: Optional[Literal["auto", "default", "flex", "scale", "priority"]] = None
    store: Optional[bool] = None
    context_management: Optional[list[ContextManagement]] = None
    conversation: Union[str, ResponseConversationParamParam, None] = None
    moderation: Optional[Moderation] = None
    prompt_cache_key: Optional[str] = None
    prompt_cache_retention: Optional[Literal["in_memory", "24h"]] = None
    safety_identifier: Optional[str] = None
    stream_options: Optional[StreamOptions] = None
    temperature: Optional[float] = None
    text: Optional[ResponseTextConfigParam] = None
    tool_choice: ToolChoice = "auto"
    tools: list[_by_type(ToolParam)] = Field(default_factory=list)  # type: ignore[valid-type]
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
    """openai's `type`-tagged union (of models, or of a request's TypedDicts) as a pydantic
    tagged union: the member is picked by its `type` instead of trying all of them (openai's own
    tag is invisible to pydantic, and trying 15 tool models on every tool was most of the time
    spent validating a tool-calling rollout). Anything the tag does not name exactly (no `type`,
    an unknown or shared one) is validated by the original union, so what is accepted, and how
    it dumps, is openai's (a member named by its tag and refusing the value lists only its own
    errors)."""
    fallback = typing.get_args(annotated)[0] if typing.get_origin(annotated) is Annotated else annotated
    by_tag: dict[str, Any] = {}
    for member in typing.get_args(fallback):
        for tag in _tags(member):
            by_tag[tag] = None if tag in by_tag else member  # a tag two members share: no shortcut
    by_tag = {tag: member for tag, member in by_tag.items() if member is not None}
    by_class = {member: tag for tag, member in by_tag.items()}

    def tag_of(value: Any) -> str:
        if isinstance(value, BaseModel):
            return by_class.get(type(value), "_any")
        kind = value.get("type") if isinstance(value, dict) else None
        return kind if isinstance(kind, str) and kind in by_tag else "_any"

    tagged = [Annotated[member, Tag(tag)] for tag, member in by_tag.items()]
    return Annotated[Union[tuple([*tagged, Annotated[fallback, Tag("_any")]])], Discriminator(tag_of)]


def _tags(member: Any) -> tuple[Any, ...]:
    """The `type` literals of a union member: a model's field, or a TypedDict's (Required) key."""
    if isinstance(member, type) and issubclass(member, BaseModel):
        return typing.get_args(member.model_fields["type"].annotation)
    kind = typing.get_type_hints(member, include_extras=True)["type"]
    while typing.get_origin(kind) is not Literal:  # Required[...], NotRequired[...]
        kind = typing.get_args(kind)[0]
    return typing.get_args(kind)


NeMoGymTool = _by_type(Tool)


class NeMoGymResponse(Response):
    """A model's response: openai's Response (its `output_text` included) with typed items.
    Items and tools serialise as the models they are (SerializeAsAny), without asking the
    discriminator again per item: a third less time dumping a tool-calling response."""

    output: list[SerializeAsAny[NeMoGymResponseOutputItem]]  # type: ignore[assignment]
    tools: list[SerializeAsAny[NeMoGymTool]]  # type: ignore[valid-type]
    usage: Optional[NeMoGymResponseUsage] = None



def __getattr__(name: str) -> Any:
    """`NeMoGymAsyncOpenAI` and `PermanentEndpointError` (an HTTP client: imported when asked for)."""
    if name in ("NeMoGymAsyncOpenAI", "PermanentEndpointError"):
        from gym_metrics.nemo_gym import _async_openai

        return getattr(_async_openai, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CHAT_REQUEST_PROVIDER_EXTENSION_FIELDS",
    "NeMoGymChatCompletionAssistantMessageForTrainingParam",
    "NeMoGymChatCompletionAssistantMessageParam",
    "NeMoGymChatCompletionContentPartFileParam",
    "NeMoGymChatCompletionContentPartImageParam",
    "NeMoGymChatCompletionContentPartInputAudioParam",
    "NeMoGymChatCompletionContentPartParam",
    "NeMoGymChatCompletionContentPartTextParam",
    "NeMoGymChatCompletionContentPartVideoUrlParam",
    "NeMoGymChatCompletionCustomToolParam",
    "NeMoGymChatCompletionDeveloperMessageParam",
    "NeMoGymChatCompletionMessage",
    "NeMoGymChatCompletionMessageCustomToolCall",
    "NeMoGymChatCompletionMessageCustomToolCallParam",
    "NeMoGymChatCompletionMessageForTraining",
    "NeMoGymChatCompletionMessageToolCall",
    "NeMoGymChatCompletionMessageToolCallFunctionParam",
    "NeMoGymChatCompletionMessageToolCallParam",
    "NeMoGymChatCompletionMessageToolCallsParam",
    "NeMoGymChatCompletionMessageToolCallUnion",
    "NeMoGymChatCompletionMessageToolCallUnionParam",
    "NeMoGymChatCompletionOutputMessage",
    "NeMoGymChatCompletionSystemMessageParam",
    "NeMoGymChatCompletionToolMessageParam",
    "NeMoGymChatCompletionToolParam",
    "NeMoGymChatCompletionToolUnionParam",
    "NeMoGymChatCompletionUserMessageParam",
    "NeMoGymChoice",
    "NeMoGymFunction",
    "NeMoGymFunctionDefinition",
    "NeMoGymInputAudio",
    "TokenIDLogProbTypedDictMixin",
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
