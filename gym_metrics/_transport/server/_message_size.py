"""Answers kept within the message size the server sends: grpc refuses a larger message by
ending the whole stream (RESOURCE_EXHAUSTED), which lost every rollout or episode on it for one
large answer. Here the answer too large fails alone, saying why and what to raise."""

from __future__ import annotations

import orjson

from gym_metrics.v1 import resources_pb2 as pb

DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
"""`serve --max-message-mb`'s default (ServerConfig.max_message_bytes)."""


def _mb(size: int) -> str:
    return f"{size / (1 << 20):.1f} MB"


def _why(what: str, size: int, limit: int) -> str:
    return f"{what} is {_mb(size)}, past the server's message limit of {_mb(limit)} (serve --max-message-mb; collect reads up to 64 MB): answer less"


def parts(response: pb.VerifyStreamResponse, limit: int) -> list[pb.VerifyStreamResponse]:
    """`response` in messages of at most `limit` bytes (all but the last marked `more`); an
    answer past the limit alone fails (VERIFY_FAILED, saying why)."""
    if response.ByteSize() <= limit:  # the usual case: one C call
        return [response]
    header = pb.VerifyStreamResponse(batch_id=response.batch_id, more=True).ByteSize()
    out, current, size = [], pb.VerifyStreamResponse(batch_id=response.batch_id), header
    for result in response.results:
        own = result.ByteSize() + 8  # the field's tag and length
        if header + own > limit:
            result.response_json, result.reward = "", 0.0
            result.error_kind = pb.VERIFY_ERROR_KIND_VERIFY_FAILED
            result.error_message = _why("the verify answer", own, limit)
            own = result.ByteSize() + 8
        if current.results and size + own > limit:
            current.more = True
            out.append(current)
            current, size = pb.VerifyStreamResponse(batch_id=response.batch_id), header
        current.results.append(result)
        size += own
    out.append(current)
    return out


def messages(answers: list[pb.SessionAnswer], limit: int) -> list[pb.SessionCallsResponse]:
    """SessionCalls answers in messages of at most `limit` bytes; an answer larger alone is
    replaced: a tool's by an error output the model reads, any other by the call's error."""
    out: list[pb.SessionCallsResponse] = []
    current, size = pb.SessionCallsResponse(), 0
    for answer in answers:
        own = answer.ByteSize() + 8  # the field's tag and length
        if own > limit:
            answer = _too_large(answer, own, limit)
            own = answer.ByteSize() + 8
        if size + own > limit and current.answers:
            out.append(current)
            current, size = pb.SessionCallsResponse(), 0
        current.answers.append(answer)
        size += own
    if current.answers:
        out.append(current)
    return out


def _too_large(answer: pb.SessionAnswer, size: int, limit: int) -> pb.SessionAnswer:
    if answer.WhichOneof("result") == "call_tool":
        output = orjson.dumps({"error": _why("the tool's output", size, limit)}).decode()
        return pb.SessionAnswer(id=answer.id, call_tool=pb.CallToolResponse(output=output, failed=True))
    what = {"verify": "the verify answer", "seed": "the session's reset", "step": "the step's answer"}.get(str(answer.WhichOneof("result")), "the answer")
    return pb.SessionAnswer(id=answer.id, error=pb.CallError(code=13, message=_why(what, size, limit)))  # INTERNAL: the environment's answer
