"""NeMo Gym's typed Responses items (`nemo_gym.openai_utils` re-exports them): messages, function
calls and their outputs, reasoning, and any other type kept as it came; told apart by `type`
(and, for messages, by role and the fields present) before validation, so an item is never
coerced into the wrong model; and the items' ForTraining variants, which declare the token IDs
and log-probs a training rollout's items carry.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal, Optional, Union

from openai.types.responses import ResponseFunctionToolCallOutputItem
from openai.types.responses.response_reasoning_item import Content as ReasoningContent
from openai.types.responses.response_reasoning_item import Summary
from pydantic import BaseModel, ConfigDict, Discriminator, Field, SerializeAsAny, Tag

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
