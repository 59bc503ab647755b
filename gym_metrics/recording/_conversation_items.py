"""A trajectory's conversation items as NeMo Gym 0.7.0's health checks validate them (its typed
Responses-API input item, `NeMoGymResponseInputItem`): each item is routed to one model by its
`type` (a message by its role, content and status; an untyped item by the fields it has, and to
a permissive MCP tool listing when nothing fits), then validated as that model. NeMo Gym calls
the row's trajectory unreadable when one item fails (ValidationError), or when routing meets an
unhashable role, status or part type (TypeError: it looks them up in sets).

Mirrored in full: messages (input, output and "easy" ones, with their content parts), function
calls and their outputs, reasoning items, MCP calls and tool listings, and the training variants
(an item with all three token fields). The other item types NeMo Gym names (computer, shell,
web search, ... calls) are the openai SDK's models, validated by them where the SDK is installed
and kept whole elsewhere (`_sdk_items`). A type NeMo Gym does not name is refused. The shapes the ATIF export checks item
by item (`_atif_shapes.check_shape`) are a part of these; they are kept there, as that export
refuses with its own messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Tag
from typing_extensions import NotRequired, Required, TypedDict

from gym_metrics.recording._atif_shapes import ITEM_STATUSES, ANSWER_PARTS
from gym_metrics.recording._sdk_items import SDK_MODELS, WholeItem, sdk_item

Status = Literal["in_progress", "completed", "incomplete"]
Phase = Optional[Literal["commentary", "final_answer"]]
TOKEN_FIELDS = frozenset({"prompt_token_ids", "generation_token_ids", "generation_log_probs"})
_SIMPLE_ROLES = frozenset({"user", "system", "developer"})
_STATUS_SET, _ANSWER_SET = frozenset(ITEM_STATUSES), frozenset(ANSWER_PARTS)
"""Sets, as NeMo Gym's: looking an unhashable value up in one raises TypeError, which NeMo Gym reports."""


class _OpenItem(BaseModel):  # the openai SDK's models keep fields they do not name
    model_config = ConfigDict(extra="allow")


class _Tokens(BaseModel):
    prompt_token_ids: List[int]
    generation_token_ids: List[int]
    generation_log_probs: List[float]
    routed_experts: Optional[Union[str, List[List[List[int]]]]] = None


def _whole_token_fields(value: Any) -> Any:
    """Token fields come all three together (routed_experts optional), and typed."""
    if isinstance(value, dict) and (present := (TOKEN_FIELDS | {"routed_experts"}).intersection(value)):
        if missing := TOKEN_FIELDS - present:
            raise ValueError(f"token fields must come together; missing: {', '.join(sorted(missing))}")
        _Tokens.model_validate({k: value[k] for k in present})
    return value


# Content parts.
class _FileCitation(_OpenItem):
    file_id: str
    filename: str
    index: int
    type: Literal["file_citation"]


class _UrlCitation(_OpenItem):
    end_index: int
    start_index: int
    title: str
    type: Literal["url_citation"]
    url: str


class _ContainerFileCitation(_OpenItem):
    container_id: str
    end_index: int
    file_id: str
    filename: str
    start_index: int
    type: Literal["container_file_citation"]


class _FilePath(_OpenItem):
    file_id: str
    index: int
    type: Literal["file_path"]


class _TopLogprob(_OpenItem):
    token: str
    bytes: List[int]
    logprob: float


class _Logprob(_TopLogprob):
    top_logprobs: List[_TopLogprob]


class OutputText(BaseModel):
    annotations: List[Union[_FileCitation, _UrlCitation, _ContainerFileCitation, _FilePath]]
    text: str
    type: Literal["output_text"] = "output_text"
    logprobs: Optional[List[_Logprob]] = None


class Refusal(BaseModel):
    refusal: str
    type: Literal["refusal"] = "refusal"


class _InputText(TypedDict):
    text: str
    type: Literal["input_text"]


class _InputImage(TypedDict):
    detail: Literal["low", "high", "auto", "original"]
    type: Literal["input_image"]
    file_id: NotRequired[Optional[str]]
    image_url: NotRequired[Optional[str]]


class _InputFile(TypedDict, total=False):
    type: Required[Literal["input_file"]]
    detail: Literal["low", "high"]
    file_data: str
    file_id: Optional[str]
    file_url: str
    filename: str


class _InputVideo(TypedDict, total=False):
    type: Required[Literal["input_video"]]
    video_url: Union[str, Dict[str, Any]]
    video: Union[str, Dict[str, Any]]


def _one_video_source(value: Any) -> Any:
    if isinstance(value, dict) and value.get("type") == "input_video":
        sources = [k for k in ("video_url", "video") if k in value]
        if len(sources) != 1:
            raise ValueError("input_video needs exactly one of video_url or video")
        source = value[sources[0]]
        url = source.get("url") if isinstance(source, dict) else source
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"input_video.{sources[0]} needs a non-empty URL")
    return value


InputPart = Annotated[Union[_InputText, _InputImage, _InputFile, _InputVideo], BeforeValidator(_one_video_source)]


class _OutputImage(TypedDict):  # a tool result's image: its detail may be left out or null
    type: Literal["input_image"]
    detail: NotRequired[Optional[Literal["low", "high", "auto", "original"]]]
    file_id: NotRequired[Optional[str]]
    image_url: NotRequired[Optional[str]]


class _OutputFile(TypedDict, total=False):
    type: Required[Literal["input_file"]]
    detail: Literal["low", "high"]
    file_data: Optional[str]
    file_id: Optional[str]
    file_url: Optional[str]
    filename: Optional[str]


# Items.
class EasyMessage(BaseModel):
    content: Union[str, List[InputPart]]
    role: Literal["user", "assistant", "system", "developer"]
    type: Literal["message"] = "message"
    phase: Phase = None


class InputMessage(BaseModel):
    content: List[InputPart]
    role: Literal["user", "system", "developer"]
    status: Status = "completed"
    type: Literal["message"] = "message"


class OutputMessage(BaseModel):
    id: str
    content: List[Union[OutputText, Refusal]]
    role: Literal["assistant"] = "assistant"
    status: Status = "completed"
    type: Literal["message"] = "message"
    phase: Phase = None


class FunctionCall(BaseModel):
    arguments: str
    call_id: str
    name: str
    type: Literal["function_call"] = "function_call"
    id: Optional[str] = None
    status: Optional[Status] = None
    namespace: Optional[str] = None


class FunctionCallOutput(BaseModel):
    call_id: str
    output: Union[str, List[Union[_InputText, _OutputImage, _OutputFile]]]
    type: Literal["function_call_output"] = "function_call_output"
    id: Optional[str] = None
    status: Optional[Status] = None


class _SummaryText(_OpenItem):
    text: str
    type: Literal["summary_text"]


class _ReasoningText(_OpenItem):
    text: str
    type: Literal["reasoning_text"]


class ReasoningItem(BaseModel):
    id: str
    summary: List[_SummaryText]
    type: Literal["reasoning"] = "reasoning"
    encrypted_content: Optional[str] = None
    content: Optional[List[_ReasoningText]] = None


class McpCall(_OpenItem):  # (fields in NeMo Gym's order, the SDK model's it extends: an item is dumped so)
    id: Optional[str] = None
    arguments: str
    name: str
    server_label: Optional[str] = None
    type: Literal["mcp_call"] = "mcp_call"
    approval_request_id: Optional[str] = None
    error: Optional[str] = None
    output: Optional[str] = None
    status: Optional[str] = None


class McpListTools(_OpenItem):
    id: Optional[str] = None
    server_label: Optional[str] = None
    tools: List[Any] = []
    type: Literal["mcp_list_tools"] = "mcp_list_tools"
    error: Optional[str] = None


_TRAINED = {"easy_message": EasyMessage, "input_message": InputMessage, "output_message": OutputMessage, "function_call": FunctionCall, "reasoning": ReasoningItem}
_MODELS: dict[str, Any] = {**_TRAINED, "function_call_output": FunctionCallOutput, "mcp_call": McpCall, "mcp_list_tools": McpListTools}
_MODELS.update({f"{tag}__training": type(f"{model.__name__}ForTraining", (model, _Tokens), {}) for tag, model in _TRAINED.items()})

_TAG_OF = {model: tag for tag, model in _MODELS.items()}


def _first_part_type(content: Any) -> Any:
    """The first part's type (a part without one but with a refusal is a refusal), or None."""
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return None
    return content[0].get("type") or ("refusal" if "refusal" in content[0] else None)


def _message_tag(item: dict[str, Any]) -> str:
    content = item.get("content")
    if item.get("role") in _SIMPLE_ROLES:  # an unhashable role, or status below, raises TypeError
        return "input_message" if isinstance(content, list) and item.get("status") in _STATUS_SET else "easy_message"
    if isinstance(content, list) and (_first_part_type(content) in _ANSWER_SET if content else isinstance(item.get("id"), str)):
        return "output_message"
    return "easy_message"


def _untyped_tag(item: dict[str, Any]) -> str:
    content = item.get("content")
    if item.get("role") in _SIMPLE_ROLES | {"assistant"} and isinstance(content, (str, list)):
        tag = _message_tag(item)
        if tag == "output_message":
            return tag if isinstance(item.get("id"), str) else "mcp_list_tools"
        return tag if _first_part_type(content) not in _ANSWER_SET else "mcp_list_tools"
    if "role" not in item and isinstance(item.get("id"), str) and isinstance(content, list):
        if not content or _first_part_type(content) in _ANSWER_SET:
            return "output_message"
    if "arguments" in item and "name" in item:
        return "function_call" if "call_id" in item else "mcp_call"
    if isinstance(item.get("call_id"), str) and "output" in item:
        return "function_call_output"
    if isinstance(item.get("id"), str) and isinstance(item.get("summary"), list):
        return "reasoning"
    return "mcp_list_tools"


def _tag(item: Any) -> Optional[str]:
    """The model an item is validated as (None: none, refused)."""
    if not isinstance(item, dict):  # a validated item, being dumped: its class's tag
        return _TAG_OF.get(type(item)) or getattr(item, "type", None)
    kind = item.get("type")
    if kind == "message":
        tag = _message_tag(item)
    elif isinstance(kind, str):
        tag = kind  # a type NeMo Gym does not name finds no model: refused
    elif kind is None:
        tag = _untyped_tag(item)
    else:
        return None
    return f"{tag}__training" if tag in _TRAINED and TOKEN_FIELDS <= item.keys() else tag


ITEM_MODELS: tuple[type[BaseModel], ...] = (*_MODELS.values(), WholeItem)
"""The models a validated conversation item is one of."""

if TYPE_CHECKING:
    ConversationItem = dict[str, Any]
else:
    ConversationItem = Annotated[
        Union[tuple(Annotated[model, Tag(tag)] for tag, model in {**_MODELS, **{kind: sdk_item(kind) for kind in SDK_MODELS}}.items())],
        Discriminator(_tag),
        BeforeValidator(_whole_token_fields),
    ]
"""One conversation item, validated as NeMo Gym validates it (see the module docstring)."""
