"""The scripted judge's Responses API route, its default item and its text-keyed answers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


from gym_metrics.testing import Reply, ScriptedChatServer, keyed_answers, request_text, text_key


def _post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


RESPONSES_BODY = {"model": "m", "input": [{"role": "system", "content": "be fair"}, {"role": "user", "content": [{"type": "input_text", "text": "A or B?"}]}]}


def test_request_text_reads_chat_and_responses_requests() -> None:
    assert request_text({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}) == "hi\nyo"
    assert request_text(RESPONSES_BODY) == "be fair\nA or B?"
    assert request_text({"input": "plain"}) == "plain"


def test_responses_route_answers_in_responses_shape_and_chat_in_chat_shape() -> None:
    with ScriptedChatServer(["[[A=B]]", "[[YES]]"]) as judge:
        status, answer = _post(judge.url + "/responses", RESPONSES_BODY)
        assert status == 200 and answer["object"] == "response"
        assert answer["output"][0]["content"][0] == {"type": "output_text", "text": "[[A=B]]", "annotations": []}
        status, chat = _post(judge.url + "/chat/completions", {"messages": [{"role": "user", "content": "q"}]})
        assert status == 200 and chat["choices"][0]["message"]["content"] == "[[YES]]"
        assert (chat["created"], chat["model"]) == (0, "scripted")  # what openai's ChatCompletion requires
        assert _post(judge.url + "/embeddings", {})[0] == 404
    assert judge.requests[0].text == "be fair\nA or B?"


def test_openai_models_accept_the_answers() -> None:
    from openai.types.chat import ChatCompletion  # a test dependency (the nemo-gym extra)
    from openai.types.responses import Response

    with ScriptedChatServer(["x", "y"]) as judge:
        Response.model_validate(_post(judge.url + "/responses", RESPONSES_BODY)[1])
        ChatCompletion.model_validate(_post(judge.url + "/chat/completions", {"messages": []})[1])


def test_keyed_answers_depend_on_the_text_only_and_fail_the_keys_given() -> None:
    chat = {"messages": [{"role": "user", "content": "be fair"}, {"role": "user", "content": "A or B?"}]}
    failing = text_key("fail me")
    with ScriptedChatServer(default=keyed_answers(["one", "two", "three"], fail_keys=[failing])) as judge:
        first = _post(judge.url + "/responses", RESPONSES_BODY)[1]["output"][0]["content"][0]["text"]
        again = _post(judge.url + "/chat/completions", chat)[1]["choices"][0]["message"]["content"]
        assert first == again == ["one", "two", "three"][int(text_key("be fair\nA or B?"), 16) % 3]
        assert _post(judge.url + "/responses", {"input": "fail me"}) == (500, "injected 500")
        assert judge.remaining == 0  # the default is not used up


def test_without_default_an_exhausted_script_answers_500() -> None:
    with ScriptedChatServer([Reply(503, "busy")]) as judge:
        assert _post(judge.url + "/chat/completions", {"messages": []}) == (503, "busy")
        assert _post(judge.url + "/chat/completions", {"messages": []}) == (500, "script exhausted")
