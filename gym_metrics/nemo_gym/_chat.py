"""NeMo Gym's Chat Completions models (`nemo_gym.openai_utils`' chat half), as ported judges and
their tests build and read them: the answer (`NeMoGymChatCompletion`, its `NeMoGymChoice`s and
`NeMoGymChatCompletionMessage`s, tool calls typed by `type`) and the request
(`NeMoGymChatCompletionCreateParamsNonStreaming`, its messages a union of typed dicts).

The request validates as NeMo Gym's does (tests/nemo_gym/test_chat_types.py compares the two):
a message is the param type of its role, a key no type declares is refused as an unknown
request field is (the model's `extra="forbid"` reaches its typed dicts), so is a `function`
message, and a message carrying any token field must carry all of them (the ForTraining
variant). Built on the openai SDK's own types, as NeMo Gym's are.
"""

from __future__ import annotations

from typing import Annotated, Any, Dict, List, Literal, Optional, Union

from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionContentPartImageParam,
    ChatCompletionContentPartTextParam,
    ChatCompletionDeveloperMessageParam,
    ChatCompletionMessage,
    ChatCompletionMessageToolCall,
    ChatCompletionMessageToolCallParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionToolParam,
    ChatCompletionUserMessageParam,
)
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_assistant_message_param import ContentArrayOfContentPart
from openai.types.chat.chat_completion_content_part_param import File as ChatCompletionContentPartFileParam
from openai.types.chat.chat_completion_custom_tool_param import ChatCompletionCustomToolParam
from openai.types.chat.chat_completion_message_custom_tool_call import ChatCompletionMessageCustomToolCall
from openai.types.chat.chat_completion_message_custom_tool_call_param import ChatCompletionMessageCustomToolCallParam
from openai.types.chat.completion_create_params import (
    ChatCompletionAudioParam,
    ChatCompletionPredictionContentParam,
    ChatCompletionStreamOptionsParam,
    ChatCompletionToolChoiceOptionParam,
    Moderation,
    ReasoningEffort,
    ResponseFormat,
    WebSearchOptions,
)
from openai.types.shared_params import FunctionDefinition
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from typing_extensions import NotRequired, Required, TypeAlias, TypedDict

from gym_metrics.nemo_gym._items import REQUIRED_TOKEN_METADATA_FIELDS, TOKEN_METADATA_FIELDS, TokenIDLogProbMixin


def _token_fields_whole(value: Any) -> Any:
    """A message with any token field has them all, each of its type (ValueError naming the
    missing ones); the message itself passes on unchanged to the union."""
    if not isinstance(value, dict):
        return value
    present = TOKEN_METADATA_FIELDS.intersection(value)
    if not present:
        return value
    missing = REQUIRED_TOKEN_METADATA_FIELDS - present
    if missing:
        raise ValueError(f"Token metadata must include all required fields; missing: {', '.join(sorted(missing))}")
    TokenIDLogProbMixin.model_validate({name: value[name] for name in present})
    return value


# ----- the answer -----


class NeMoGymFunction(BaseModel):
    arguments: str
    name: str


class NeMoGymChatCompletionMessageToolCall(ChatCompletionMessageToolCall):
    function: NeMoGymFunction  # type: ignore[assignment]


class NeMoGymChatCompletionMessageCustomToolCall(ChatCompletionMessageCustomToolCall):
    pass


NeMoGymChatCompletionMessageToolCallUnion = Annotated[
    Union[NeMoGymChatCompletionMessageToolCall, NeMoGymChatCompletionMessageCustomToolCall],
    Field(discriminator="type"),
]


class NeMoGymChatCompletionMessage(ChatCompletionMessage):
    tool_calls: Optional[List[NeMoGymChatCompletionMessageToolCallUnion]] = None  # type: ignore[assignment]


class NeMoGymChatCompletionMessageForTraining(NeMoGymChatCompletionMessage, TokenIDLogProbMixin):
    pass


NeMoGymChatCompletionOutputMessage: TypeAlias = Annotated[
    Union[NeMoGymChatCompletionMessage, NeMoGymChatCompletionMessageForTraining],
    BeforeValidator(_token_fields_whole),
]


class NeMoGymChoice(Choice):
    message: NeMoGymChatCompletionOutputMessage


class NeMoGymChatCompletion(ChatCompletion):
    choices: List[NeMoGymChoice]  # type: ignore[assignment]


# ----- the request -----


class NeMoGymFunctionDefinition(FunctionDefinition):
    pass


class NeMoGymChatCompletionToolParam(ChatCompletionToolParam):
    function: Required[NeMoGymFunctionDefinition]


class NeMoGymChatCompletionCustomToolParam(ChatCompletionCustomToolParam):
    pass


NeMoGymChatCompletionToolUnionParam = Annotated[
    Union[NeMoGymChatCompletionToolParam, NeMoGymChatCompletionCustomToolParam],
    Field(discriminator="type"),
]


class NeMoGymChatCompletionContentPartTextParam(ChatCompletionContentPartTextParam):
    pass


class NeMoGymChatCompletionContentPartImageParam(ChatCompletionContentPartImageParam):
    pass


class NeMoGymInputAudio(TypedDict, total=False):
    """Audio in a content part, its `format` any token (the SDK's allows wav and mp3 only;
    OpenAI-compatible servers decode m4a, flac, ogg, ... by content)."""

    data: Required[str]
    format: Required[str]


class NeMoGymChatCompletionContentPartInputAudioParam(TypedDict, total=False):
    type: Required[Literal["input_audio"]]
    input_audio: Required[NeMoGymInputAudio]


class NeMoGymChatCompletionContentPartFileParam(ChatCompletionContentPartFileParam):
    pass


class NeMoGymChatCompletionContentPartVideoUrlParam(TypedDict, total=False):
    video_url: Required[Union[str, Dict[str, Any]]]
    type: Required[Literal["video_url"]]


NeMoGymChatCompletionContentPartParam = Union[
    NeMoGymChatCompletionContentPartTextParam,
    NeMoGymChatCompletionContentPartImageParam,
    NeMoGymChatCompletionContentPartInputAudioParam,
    NeMoGymChatCompletionContentPartFileParam,
    NeMoGymChatCompletionContentPartVideoUrlParam,
]

# Content is a list where the SDK has an iterable: pydantic would otherwise keep a lazy iterator.


class NeMoGymChatCompletionUserMessageParam(ChatCompletionUserMessageParam):
    content: Required[Union[str, List[NeMoGymChatCompletionContentPartParam]]]  # type: ignore[misc]


class NeMoGymChatCompletionSystemMessageParam(ChatCompletionSystemMessageParam):
    content: Required[Union[str, List[NeMoGymChatCompletionContentPartTextParam]]]  # type: ignore[misc]


class NeMoGymChatCompletionDeveloperMessageParam(ChatCompletionDeveloperMessageParam):
    content: Required[Union[str, List[NeMoGymChatCompletionContentPartTextParam]]]  # type: ignore[misc]


class NeMoGymChatCompletionMessageToolCallFunctionParam(TypedDict, total=False):
    arguments: Required[str]
    name: Required[str]


class NeMoGymChatCompletionMessageToolCallParam(ChatCompletionMessageToolCallParam):
    function: NeMoGymChatCompletionMessageToolCallFunctionParam


class NeMoGymChatCompletionMessageCustomToolCallParam(ChatCompletionMessageCustomToolCallParam):
    pass


NeMoGymChatCompletionMessageToolCallUnionParam = Annotated[
    Union[NeMoGymChatCompletionMessageToolCallParam, NeMoGymChatCompletionMessageCustomToolCallParam],
    Field(discriminator="type"),
]


def _without_outer_names(value: Any) -> Any:
    """Tool calls some harnesses send with a `name` beside `function` (redundant, and not a
    field of the call): that key dropped, on copies, the caller's list left as it was."""
    if not isinstance(value, list) or not any(isinstance(call, dict) and "name" in call for call in value):
        return value
    return [{k: v for k, v in call.items() if k != "name"} if isinstance(call, dict) else call for call in value]


NeMoGymChatCompletionMessageToolCallsParam: TypeAlias = Annotated[
    List[NeMoGymChatCompletionMessageToolCallUnionParam], BeforeValidator(_without_outer_names)
]


class TokenIDLogProbTypedDictMixin(TypedDict):
    prompt_token_ids: List[int]
    generation_token_ids: List[int]
    generation_log_probs: List[float]
    routed_experts: NotRequired[Union[str, List[List[List[int]]]]]


class NeMoGymChatCompletionAssistantMessageParam(ChatCompletionAssistantMessageParam, total=False):
    content: Union[str, List[ContentArrayOfContentPart], None]  # type: ignore[misc]
    tool_calls: Optional[NeMoGymChatCompletionMessageToolCallsParam]  # type: ignore[misc]
    reasoning_content: Optional[str]
    """The reasoning some harnesses replay on an assistant turn."""


class NeMoGymChatCompletionAssistantMessageForTrainingParam(
    NeMoGymChatCompletionAssistantMessageParam, TokenIDLogProbTypedDictMixin
):
    pass


class NeMoGymChatCompletionToolMessageParam(ChatCompletionToolMessageParam):
    content: Required[Union[str, List[NeMoGymChatCompletionContentPartTextParam]]]  # type: ignore[misc]


NeMoGymChatCompletionMessageParam: TypeAlias = Annotated[
    Union[
        NeMoGymChatCompletionDeveloperMessageParam,
        NeMoGymChatCompletionSystemMessageParam,
        NeMoGymChatCompletionUserMessageParam,
        NeMoGymChatCompletionAssistantMessageParam,
        NeMoGymChatCompletionToolMessageParam,
        NeMoGymChatCompletionAssistantMessageForTrainingParam,
    ],
    BeforeValidator(_token_fields_whole),
]
"""A chat message as a request carries it (no `function` messages: deprecated, refused)."""

CHAT_REQUEST_PROVIDER_EXTENSION_FIELDS = frozenset({"chat_template_kwargs", "thinking", "output_config"})
"""The request fields past the SDK's that the request accepts (any other unknown one is refused)."""


class NeMoGymChatCompletionCreateParamsNonStreaming(BaseModel):
    """A Chat Completions request (what a judge or policy model is sent): NeMo Gym's fields,
    defaults and types, unknown fields refused, so an environment that keeps one in its verify
    answer (gdp_pdf's criterion evaluations) dumps what NeMo Gym dumps."""

    model_config = ConfigDict(extra="forbid")

    messages: List[NeMoGymChatCompletionMessageParam]
    model: Optional[str] = None
    audio: Optional[ChatCompletionAudioParam] = None
    frequency_penalty: Optional[float] = None
    logit_bias: Optional[Dict[str, int]] = None
    logprobs: Optional[bool] = None
    max_completion_tokens: Optional[int] = None
    max_tokens: Optional[int] = None
    metadata: Optional[Dict[str, str]] = None
    moderation: Optional[Moderation] = None
    modalities: Optional[List[Literal["text", "audio"]]] = None
    n: Optional[int] = None
    parallel_tool_calls: bool = True
    prediction: Optional[ChatCompletionPredictionContentParam] = None
    presence_penalty: Optional[float] = None
    prompt_cache_key: Optional[str] = None
    prompt_cache_retention: Optional[Literal["in_memory", "24h"]] = None
    reasoning_effort: Optional[ReasoningEffort] = None
    response_format: Optional[ResponseFormat] = None
    seed: Optional[int] = None
    safety_identifier: Optional[str] = None
    service_tier: Optional[Literal["auto", "default", "flex", "scale", "priority"]] = None
    stop: Union[Optional[str], List[str], None] = None
    store: Optional[bool] = None
    stream_options: Optional[ChatCompletionStreamOptionsParam] = None
    temperature: Optional[float] = None
    tool_choice: Optional[ChatCompletionToolChoiceOptionParam] = None
    tools: Optional[List[NeMoGymChatCompletionToolUnionParam]] = None
    top_logprobs: Optional[int] = None
    top_p: Optional[float] = None
    user: Optional[str] = None
    verbosity: Optional[Literal["low", "medium", "high"]] = None
    web_search_options: Optional[WebSearchOptions] = None
    stream: Optional[Literal[False]] = None
    # provider extensions clients send at the top level (the SDK flattens extra_body)
    chat_template_kwargs: Optional[Dict[str, Any]] = None
    thinking: Optional[Dict[str, Any]] = None
    output_config: Optional[Dict[str, Any]] = None
