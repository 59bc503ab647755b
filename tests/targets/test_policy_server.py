"""The scripted policy server itself: routes, per-prompt counts, faults and recording."""

from __future__ import annotations

import httpx

from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, prompt_of


def test_prompt_of_reads_the_last_user_message() -> None:
    assert prompt_of({"input": "plain"}) == "plain"
    assert prompt_of({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}) == "c"
    assert prompt_of({"input": [{"role": "user", "content": [{"type": "input_text", "text": "parts"}]}]}) == "parts"


def test_routes_faults_counts_and_recording() -> None:
    answers = {"q": PolicyAnswer(text="a", input_tokens=2, output_tokens=1)}
    with ScriptedPolicyServer(answers, fail_first=1, retry_after="3") as policy, httpx.Client(timeout=5) as http:
        chat = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
        failed = http.post(f"{policy.url}/chat/completions", json=chat, headers={"X-Test": "1"})
        ok = http.post(f"{policy.url}/chat/completions", json=chat)
        responses = http.post(f"{policy.url}/responses", json={"model": "m", "input": "q"})
        unknown = http.post(f"{policy.url}/responses", json={"input": "other"})
        elsewhere = http.post(f"{policy.url}/completions", json={"prompt": "q", "messages": [{"role": "user", "content": "q"}]})
    assert (failed.status_code, failed.headers["retry-after"]) == (503, "3")
    assert ok.json()["choices"][0]["message"]["content"] == "a"
    assert ok.json()["usage"] == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}
    assert responses.json()["output"][0]["content"][0]["text"] == "a"
    assert (unknown.status_code, elsewhere.status_code) == (503, 404)  # faults count per prompt: "other" is on its first call
    assert policy.calls == {"q": 4, "other": 1}
    assert policy.requests[0].header("x-test") == "1" and policy.requests[0].body == chat
    assert len(policy.requests_for("q")) == 4


def test_an_unknown_prompt_is_a_400() -> None:
    with ScriptedPolicyServer({"q": "a"}) as policy, httpx.Client(timeout=5) as http:
        answer = http.post(f"{policy.url}/responses", json={"input": "other"})
    assert answer.status_code == 400 and "other" in answer.text
