"""The conversation item types whose NeMo Gym 0.7.0 model is the openai SDK's (hosted and
client-run tool calls and their outputs, compaction, ...): validated and dumped by that model, as
NeMo Gym's union does, where the SDK is installed (the nemo-gym extra); kept whole elsewhere.

The SDK's models are imported on the first such item, not with this package: they take a quarter
of a second to import, and every `collect` and `serve` imports recording.
"""

from __future__ import annotations

import functools
import importlib
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, PlainSerializer, PlainValidator, SerializationInfo
from pydantic_core import to_jsonable_python

_RESPONSES = "openai.types.responses"
_INPUT, _OUTPUT = f"{_RESPONSES}.response_input_item", f"{_RESPONSES}.response_output_item"
SDK_MODELS: dict[str, tuple[str, str]] = {
    "mcp_approval_request": (_OUTPUT, "McpApprovalRequest"),  # NeMo Gym relaxes two fields (below)
    "file_search_call": (_RESPONSES, "ResponseFileSearchToolCall"),
    "web_search_call": (_RESPONSES, "ResponseFunctionWebSearch"),
    "computer_call": (_RESPONSES, "ResponseComputerToolCall"),
    "image_generation_call": (_OUTPUT, "ImageGenerationCall"),
    "code_interpreter_call": (_RESPONSES, "ResponseCodeInterpreterToolCall"),
    "local_shell_call": (_OUTPUT, "LocalShellCall"),
    "custom_tool_call": (_RESPONSES, "ResponseCustomToolCall"),
    "computer_call_output": (_INPUT, "ComputerCallOutput"),
    "custom_tool_call_output": (_INPUT, "ResponseCustomToolCallOutput"),
    "local_shell_call_output": (_INPUT, "LocalShellCallOutput"),
    "mcp_approval_response": (_INPUT, "McpApprovalResponse"),
    "apply_patch_call": (_RESPONSES, "ResponseApplyPatchToolCall"),
    "apply_patch_call_output": (_RESPONSES, "ResponseApplyPatchToolCallOutput"),
    "compaction": (_RESPONSES, "ResponseCompactionItem"),
    "shell_call": (_RESPONSES, "ResponseFunctionShellToolCall"),
    "shell_call_output": (_RESPONSES, "ResponseFunctionShellToolCallOutput"),
    "tool_search_call": (_RESPONSES, "ResponseToolSearchCall"),
    "tool_search_output": (_RESPONSES, "ResponseToolSearchOutputItem"),
    "compaction_trigger": (_INPUT, "CompactionTrigger"),
    "additional_tools": (_INPUT, "AdditionalTools"),
}
"""Each type's model in NeMo Gym's `NeMoGymResponseInputItem` (openai_utils.py): (module, name)."""


class WholeItem(BaseModel):
    """An item of one of these types where the SDK is not installed: any object, kept as it came."""

    model_config = ConfigDict(extra="allow")


@functools.lru_cache(maxsize=None)
def sdk_model(kind: str) -> type[BaseModel] | None:
    """The SDK's model of item type `kind` (None without the SDK)."""
    module, name = SDK_MODELS[kind]
    try:
        model: type[BaseModel] = getattr(importlib.import_module(module), name)
    except ImportError:
        return None
    if kind == "mcp_approval_request":  # as NeMo Gym's NeMoGymResponseMcpApprovalRequest

        class McpApprovalRequest(model):  # type: ignore[valid-type,misc]
            type: Literal["mcp_approval_request"] = "mcp_approval_request"
            id: Optional[str] = None
            server_label: Optional[str] = None

        return McpApprovalRequest
    return model


def _validated(kind: str) -> Any:
    def validate(value: Any) -> BaseModel:
        model = sdk_model(kind) or WholeItem
        return value if isinstance(value, model) else model.model_validate(value)

    return validate


def own_dump(value: Any, info: SerializationInfo) -> Any:
    """`value` as its own class dumps it (a model), or as the JSON it is, in the dump's mode."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode=info.mode, by_alias=bool(info.by_alias), exclude_none=info.exclude_none)
    return to_jsonable_python(value) if info.mode == "json" else value


def sdk_item(kind: str) -> Any:
    """The union member of item type `kind` (see the module docstring)."""
    return Annotated[Any, PlainValidator(_validated(kind)), PlainSerializer(own_dump)]
