"""An answer larger than the server's message limit fails alone, and a batch's answers that
only together pass it come in parts: grpc refused the whole message by ending the stream
(RESOURCE_EXHAUSTED), and with it every rollout of the collect (exit 2, nothing written) or
every episode on the session stream (taken for a lost server, retried, exit 4). A real server
with a 1 MB limit, collected by `collect_async`."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic

from gym_metrics import ResourcesClient, Session, SimpleResourcesServer, tool
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment

LIMIT = 1 << 20


class Sized(BaseVerifyRequest):
    blob_kb: int = 0
    blob_char: str = "x"


class Answer(BaseVerifyResponse):
    blob: str = ""


class Blobs(pydantic.BaseModel):
    kb: int


class Large(SimpleResourcesServer):
    async def verify(self, body: Sized) -> Answer:
        return Answer(reward=1.0, blob=body.blob_char * (body.blob_kb * 1024))

    @tool
    async def blob(self, args: Blobs, session: Session) -> str:
        """A text of `kb` kilobytes."""
        return "y" * (args.kb * 1024)


def _rows(path: Path, sizes: list[int], **more: object) -> Path:
    path.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": i, "blob_kb": kb, **more}) + "\n" for i, kb in enumerate(sizes)))
    return path


async def test_a_verify_answer_past_the_limit_fails_alone(tmp_path: Path) -> None:
    rows = _rows(tmp_path / "in.jsonl", [1, 2048, 1, 1, 400, 400, 400], response={"output": []})
    async with serve_environment(Large, max_message_bytes=LIMIT) as server, ResourcesClient(server.address) as client:
        result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(batch_size=8))
    written = {r["_ng_task_index"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    failed = {t for t, r in written.items() if "_gm_error" in r}
    assert len(written) == 7 and result.verified == 7
    assert failed == {1}  # the one too large alone; the three that fit alone but not together come in parts
    assert [written[t]["blob"] == "x" * (kb * 1024) for t, kb in ((4, 400), (5, 400), (6, 400), (0, 1))] == [True] * 4
    message = written[1]["_gm_error"]["message"]
    assert "past the server's message limit of 1.0 MB (serve --max-message-mb; collect reads up to 64 MB)" in message, message


async def test_answers_of_text_past_ascii_are_sized_in_bytes_not_characters(tmp_path: Path) -> None:
    """The server sizes an answer from the text it wrote (not by encoding it again): three
    answers of 200 K two-byte characters are 0.6 MB of characters but 1.2 MB of UTF-8, so they
    come in parts; sized by characters they went as one message and grpc ended the stream."""
    rows = _rows(tmp_path / "in.jsonl", [200, 200, 200], response={"output": []}, blob_char="\u00e9")
    async with serve_environment(Large, max_message_bytes=LIMIT) as server, ResourcesClient(server.address) as client:
        result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(batch_size=8))
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert result.verified == 3 and [r["blob"] == "\u00e9" * (200 * 1024) for r in written] == [True] * 3


async def test_a_tool_output_past_the_limit_is_an_error_the_model_reads(tmp_path: Path) -> None:
    rows = tmp_path / "in.jsonl"
    rows.write_text(json.dumps({"agent_ref": {"name": "a"}, "responses_create_params": {"input": "big"}}) + "\n")
    script = {"big": [PolicyAnswer(tool_calls=[{"name": "blob", "arguments": {"kb": 2048}}, {"name": "blob", "arguments": {"kb": 1}}]), PolicyAnswer(text="done")]}
    with ScriptedPolicyServer(script) as policy:
        async with serve_environment(Large, max_message_bytes=LIMIT) as server, ResourcesClient(server.address) as client:
            opts = CollectOptions(target=ModelTargetConfig(url=policy.url, model="scripted", api="responses"))  # type: ignore[arg-type]
            result = await collect_async(client, rows, tmp_path / "out.jsonl", opts)
    [row] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    outputs = [i["output"] for i in row["response"]["output"] if i["type"] == "function_call_output"]
    assert json.loads(outputs[0])["error"].startswith("the tool's output is 2.0 MB, past the server's message limit of 1.0 MB")
    assert outputs[1] == "y" * 1024 and row["reward"] == 1.0
    assert (result.tool_calls, result.failed_tool_calls, result.episodes_retried) == (2, 1, 0)


async def test_unary_answers_past_the_limit_fail_alone_saying_why() -> None:
    """CallTool and ScoreGroups built answers grpc refused after the tool had run (its side
    effects done) or every verify had closed its session: RESOURCE_EXHAUSTED, nothing said."""
    async with serve_environment(Large, max_message_bytes=LIMIT) as server, ResourcesClient(server.address) as client:
        session = await client.seed_session({})
        big = await client.call_tool(session, "blob", {"kb": 2048})
        assert big.failed and json.loads(big.output)["error"].startswith("the tool's output is 2.0 MB, past the server's message limit of 1.0 MB")
        assert (await client.call_tool(session, "blob", {"kb": 1})).output == "y" * 1024  # the session lives on
        [scored] = await client.score_groups([({"blob_kb": 400, "response": {"output": []}}, ["a", "b", "c", "d"])])
        assert scored.failed.count(True) == 2 and scored.rewards.count(1.0) == 2  # the two that fit keep theirs
        failed = scored.error_message[scored.failed.index(True)]
        assert "the verify answer is 0.4 MB, past the server's message limit of 1.0 MB" in failed and "omit_responses" in failed
        assert [len(json.loads(r)["blob"]) for r in scored.response_json if r] == [400 * 1024] * 2
        [lean] = await client.score_groups([({"blob_kb": 400, "response": {"output": []}}, ["a", "b", "c", "d"])], omit_responses=True)
        assert lean.rewards == [1.0] * 4 and not any(lean.failed)
