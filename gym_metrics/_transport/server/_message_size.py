"""Answers kept within the message size the server sends: grpc refuses a larger message by
ending the whole stream (RESOURCE_EXHAUSTED), which lost every rollout or episode on it for one
large answer. Here the answer too large fails alone, saying why and what to raise."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import orjson
from google.protobuf.message import Message

from gym_metrics.v1 import resources_pb2 as pb

M = TypeVar("M", bound=Message)

DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
"""`serve --max-message-mb`'s default (ServerConfig.max_message_bytes)."""


def _mb(size: int) -> str:
    return f"{size / (1 << 20):.1f} MB"


def _why(what: str, size: int, limit: int) -> str:
    return f"{what} is {_mb(size)}, past the server's message limit of {_mb(limit)} (serve --max-message-mb; collect reads up to 64 MB): answer less"


def parts(response: pb.VerifyStreamResponse, limit: int, bound: int | None = None) -> list[pb.VerifyStreamResponse]:
    """`response` in messages of at most `limit` bytes (all but the last marked `more`); an
    answer past the limit alone fails (VERIFY_FAILED, saying why). `bound`, when known, is the
    answer's size at most: within the limit, the answer is not measured (ByteSize encodes it)."""
    if (bound is not None and bound <= limit) or response.ByteSize() <= limit:  # the usual case
        return [response]
    header = pb.VerifyStreamResponse(batch_id=response.batch_id, more=True).ByteSize()
    out = [pb.VerifyStreamResponse(batch_id=response.batch_id, results=group, more=True) for group in _packed(response.results, limit, header, _failed)]
    out[-1].more = False
    return out


def positioned_parts(response: pb.VerifyStreamResponse, positions: list[int], last: bool, limit: int) -> list[pb.VerifyStreamResponse]:
    """The results of `response` at `positions` (an answer_each batch's finished ones) with their
    positions, in messages of at most `limit` bytes; all marked `more` but the batch's last."""
    results = response.results
    # each position costs at most 5 bytes of the packed field: kept out of the limit up front
    groups = _packed([results[p] for p in positions], limit - 5 * len(positions) - 8, pb.VerifyStreamResponse(batch_id=response.batch_id, more=True).ByteSize(), _failed)
    out, start = [], 0
    for group in groups:
        out.append(pb.VerifyStreamResponse(batch_id=response.batch_id, results=group, positions=positions[start : start + len(group)], more=True))
        start += len(group)
    out[-1].more = not last
    return out


def messages(answers: list[pb.SessionAnswer], limit: int) -> list[pb.SessionCallsResponse]:
    """SessionCalls answers in messages of at most `limit` bytes; an answer larger alone is
    replaced: a tool's by an error output the model reads, any other by the call's error."""
    return [pb.SessionCallsResponse(answers=group) for group in _packed(answers, limit, 0, _too_large)]


def tool_answer(response: pb.CallToolResponse, limit: int) -> pb.CallToolResponse:
    """CallTool's answer, or past `limit` the error output SessionCalls gives (grpc failed the
    call after the tool had run, its side effects done, with nothing said)."""
    size = response.ByteSize()
    if size <= limit:
        return response
    return pb.CallToolResponse(output=orjson.dumps({"error": _why("the tool's output", size, limit)}).decode(), failed=True)


def scores_answer(response: pb.ScoreGroupsResponse, limit: int) -> pb.ScoreGroupsResponse:
    """ScoreGroups' answer within `limit`: past it, the completions with the largest verify
    answers fail (VERIFY_FAILED, saying why), largest first, until it fits (grpc failed the
    whole call after every verify had run and closed its session)."""
    size = response.ByteSize()
    if size <= limit:
        return response
    largest = sorted(((len(text.encode()), g, i) for g, group in enumerate(response.groups) for i, text in enumerate(group.response_json)), reverse=True)
    for own, g, i in largest:
        if size <= limit:
            break
        group = response.groups[g]
        why = _why("the verify answer", own, limit) + ", or send omit_responses"
        group.rewards[i], group.failed[i], group.error_kind[i] = 0.0, True, pb.VERIFY_ERROR_KIND_VERIFY_FAILED
        group.error_message[i], group.response_json[i] = why, ""
        size = response.ByteSize() if own < 1 << 16 else size - own + len(why)  # exact for the small, cheap for the large
    return response


def _packed(items: Sequence[M], limit: int, header: int, too_large: Callable[[M, int, int], M]) -> list[list[M]]:
    """`items` in order, in groups whose encoded size (with `header`) stays within `limit`; an
    item past it alone replaced by `too_large(item, size, limit)`."""
    groups: list[list[M]] = [[]]
    size = header
    for item in items:
        own = item.ByteSize() + 8  # the field's tag and length
        if header + own > limit:
            item = too_large(item, own, limit)
            own = item.ByteSize() + 8
        if groups[-1] and size + own > limit:
            groups.append([])
            size = header
        groups[-1].append(item)
        size += own
    return groups


def _failed(result: pb.VerifyResult, size: int, limit: int) -> pb.VerifyResult:
    return pb.VerifyResult(task_index=result.task_index, rollout_index=result.rollout_index,
                           error_kind=pb.VERIFY_ERROR_KIND_VERIFY_FAILED, error_message=_why("the verify answer", size, limit))  # fmt: skip


def _too_large(answer: pb.SessionAnswer, size: int, limit: int) -> pb.SessionAnswer:
    if answer.WhichOneof("result") == "call_tool":
        output = orjson.dumps({"error": _why("the tool's output", size, limit)}).decode()
        return pb.SessionAnswer(id=answer.id, call_tool=pb.CallToolResponse(output=output, failed=True))
    what = {"verify": "the verify answer", "seed": "the session's reset", "step": "the step's answer"}.get(str(answer.WhichOneof("result")), "the answer")
    return pb.SessionAnswer(id=answer.id, error=pb.CallError(code=13, message=_why(what, size, limit)))  # INTERNAL: the environment's answer
