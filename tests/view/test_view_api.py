"""The viewer's JSON API over real files, served by uvicorn on 127.0.0.1:0 (issue 40 item 2):
runs and agents, exact filtered counts and pages, tasks, text search with its cursor, one
rollout whole with its health, two runs side by side with compare's paired difference, a file
followed as it grows (a partial line waits), a real collect followed to its health verdicts,
and bad requests refused with the parameter named."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gym_metrics.view import Viewer

from _viewer_data import XSS, row, write_run

DATA = Path(__file__).parents[1] / "data" / "health"


def get(url: str, headers: dict[str, str] | None = None) -> Any:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=30) as res:
        return json.loads(res.read())


def refused(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> tuple[int, Any]:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}, method=method), timeout=30)
    return err.value.code, json.loads(err.value.read() or b"null")


def until(probe: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("the viewer did not get there in time")


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    write_run(tmp_path / "a.jsonl", "policy-a", tasks=30, repeats=4, reward=lambda t, r: float(t % 3 != 0 or r == 0), errors={7: "timeout"})
    write_run(tmp_path / "b.jsonl", "policy-b", tasks=30, repeats=4, reward=lambda t, r: float(t % 5 != 0))
    return tmp_path


def loaded(v: Viewer, runs: int = 1) -> list[dict[str, Any]]:
    """The runs once every one is indexed to its end."""
    def done() -> Any:
        got = get(v.url + "api/runs")["runs"]
        return got if all(r.get("bytes") == r.get("file_size") and r.get("file_size", 0) > 0 for r in got[:runs]) else None

    found: list[dict[str, Any]] = until(done)
    return found


def test_runs_agents_and_exact_filtered_pages(two_runs: Path) -> None:
    with Viewer([two_runs]) as v:
        runs = loaded(v, 2)
        assert [r["name"] for r in runs] == ["a.jsonl", "b.jsonl"]
        a = runs[0]["agents"][0]
        rewards = np.array([float(t % 3 != 0 or r == 0) for t in range(30) for r in range(4)])
        rewards = np.delete(rewards, 7 * 4)  # task 7's first rollout failed: no reward
        assert (a["name"], a["rows"], a["measured"], a["errors"]) == ("policy-a", 120, 119, 1)
        assert a["mean_reward"] == pytest.approx(rewards.mean())

        page = get(v.url + "api/runs/0/rows?reward_max=0&limit=7")
        zeros = [(t, r) for t in range(30) for r in range(4) if t % 3 == 0 and r > 0]
        assert page["total"] == len(zeros) and len(page["rows"]) == 7 and page["next"] == 7
        assert [(x["task"], x["rollout"]) for x in page["rows"]] == zeros[:7]
        assert page["rows"][0]["preview"].startswith("Task 0: what is 0 + 1?")
        last = get(v.url + f"api/runs/0/rows?reward_max=0&limit=7&offset={len(zeros) - 2}")
        assert [(x["task"], x["rollout"]) for x in last["rows"]] == zeros[-2:] and last["next"] is None

        failed = get(v.url + "api/runs/0/rows?failure=timeout")
        assert [(x["task"], x["rollout"], x["error"], x["reward"]) for x in failed["rows"]] == [(7, 0, "timeout", None)]
        assert get(v.url + "api/runs/0/rows?failure=none&task=7")["total"] == 3
        assert get(v.url + "api/runs/0/rows?agent=policy-b")["total"] == 0

        tasks = get(v.url + "api/runs/0/tasks?limit=4&offset=3")
        assert tasks["total"] == 30
        assert [(t["task"], t["rollouts"], t["pass_rate"]) for t in tasks["tasks"]] == [(3, 4, 0.25), (4, 4, 1.0), (5, 4, 1.0), (6, 4, 0.25)]


def test_text_search_goes_on_from_its_cursor(two_runs: Path) -> None:
    with Viewer([two_runs / "a.jsonl"]) as v:
        loaded(v)
        first = get(v.url + "api/runs/0/rows?q=what+is+2+%2B&limit=2")  # "what is 2 +": task 2's four rollouts
        assert [(x["task"], x["rollout"]) for x in first["rows"]] == [(2, 0), (2, 1)]
        more = get(v.url + f"api/runs/0/rows?q=what+is+2+%2B&limit=2&offset={first['next']}")
        assert [(x["task"], x["rollout"]) for x in more["rows"]] == [(2, 2), (2, 3)]
        rest = get(v.url + f"api/runs/0/rows?q=what+is+2+%2B&limit=2&offset={more['next']}")
        assert rest["rows"] == [] and rest["next"] is None and rest["scanned"] == 120
        # the JSON-escaped form of a quote is found too, and the search is case-blind
        assert get(v.url + "api/runs/0/rows?q=ONERROR%3D%22WINDOW&limit=500")["next"] is None
        assert len(get(v.url + "api/runs/0/rows?q=ONERROR%3D%22WINDOW&limit=500")["rows"]) == 120


def test_one_rollout_whole_with_its_health(tmp_path: Path) -> None:
    faults = tmp_path / "faults.jsonl"
    faults.write_bytes((DATA / "faults.jsonl").read_bytes())
    with Viewer([faults]) as v:
        runs = loaded(v)
        assert runs[0]["bad_lines_count"] == 1  # the fault file's unreadable line
        rows = get(v.url + "api/runs/0/rows?limit=500")["rows"]
        lines = [r["line"] for r in rows]
        raw = faults.read_text().splitlines()
        for line in (lines[0], lines[5]):
            got = get(v.url + f"api/runs/0/rollouts/{line}")
            assert got["row"] == json.loads(raw[line - 1])  # every field of the row
            assert got["previous"] == (lines[lines.index(line) - 1] if line != lines[0] else None)
        unhealthy = [get(v.url + f"api/runs/0/rollouts/{n}")["health"] for n in lines]
        assert any(h["verdict"] == "unhealthy" and h["findings"] for h in unhealthy)
        assert any(h["verdict"] == "healthy" for h in unhealthy)
        code, body = refused(v.url + "api/runs/0/rollouts/14")  # the bad line
        assert code == 404 and "line 14 of faults.jsonl is not a rollout row" in body["error"]


def test_two_runs_side_by_side(two_runs: Path) -> None:
    with Viewer([two_runs]) as v:
        loaded(v, 2)
        c = get(v.url + "api/compare?a=0&b=1")
        # A: tasks t % 3 == 0 pass 1 of 4 (fail); B: tasks t % 5 == 0 fail
        a_pass = {t for t in range(30) if t % 3 != 0}
        b_pass = {t for t in range(30) if t % 5 != 0}
        assert c["common_tasks"] == 30 and (c["only_a"], c["only_b"]) == (0, 0)
        assert c["pass_to_fail"] == len(a_pass - b_pass) and c["fail_to_pass"] == len(b_pass - a_pass)
        flips = {t["task"]: t["flip"] for t in c["tasks"]}
        assert {t for t, f in flips.items() if f == "pass→fail"} == a_pass - b_pass
        assert [t["flip"] for t in c["tasks"]][: c["pass_to_fail"] + c["fail_to_pass"]].count("") == 0  # flips first
        p = c["paired"]
        assert p["metric"] == "mean_reward" and p["common_tasks"] == 30
        assert p["difference"] == pytest.approx(p["value_a"] - p["value_b"]) and p["ci_low"] < p["difference"] < p["ci_high"]


def test_a_growing_file_is_followed_and_a_partial_line_waits(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    path.write_text("")
    with Viewer([path]) as v:
        for n in range(1, 4):  # bounded: three appends
            with path.open("a") as f:
                f.write(json.dumps(row("live", n, 0, 1.0)) + "\n")
            until(lambda: get(v.url + "api/runs")["runs"][0]["rows"] == n)
        half = json.dumps(row("live", 9, 0, 0.0))
        with path.open("a") as f:
            f.write(half[:40])
        time.sleep(0.8)  # more than a poll: the viewer looked and waited
        run = get(v.url + "api/runs")["runs"][0]
        assert run["rows"] == 3 and run["file_size"] > run["bytes"]
        with path.open("a") as f:
            f.write(half[40:] + "\n")
        until(lambda: get(v.url + "api/runs")["runs"][0]["rows"] == 4)
        assert get(v.url + "api/runs/0/rows?task=9")["rows"][0]["reward"] == 0.0
        path.write_text(json.dumps(row("again", 0, 0, 1.0)) + "\n")  # replaced by a shorter file: read afresh
        until(lambda: [a["name"] for a in get(v.url + "api/runs")["runs"][0]["agents"]] == ["again"] or None)


async def test_a_real_collect_is_followed_to_its_health_verdicts(tmp_path: Path) -> None:
    """`collect --trajectory --health` into a folder the viewer watches: every row shows up, then
    each row's verdict from the rollout_verdicts.jsonl the collect wrote at its end."""
    import asyncio
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "collector"))
    from test_collect_generate import collect_with_trajectory_and_health

    out = tmp_path / "run" / "out.jsonl"
    out.parent.mkdir()
    out.write_text("")
    with Viewer([out]) as v:
        await collect_with_trajectory_and_health(tmp_path, out, 4)
        written = [json.loads(line) for line in out.read_text().splitlines()]
        verdicts = {json.loads(x)["_ng_task_index"]: json.loads(x)["verdict"] for x in (out.parent / "rollout_verdicts.jsonl").read_text().splitlines()}

        def shown() -> Any:
            rows = get(v.url + "api/runs/0/rows")["rows"]
            return rows if len(rows) == len(written) and all(r["verdict"] for r in rows) else None

        rows = await asyncio.to_thread(until, shown)
        assert [(r["task"], r["reward"]) for r in rows] == [(w["_ng_task_index"], w["reward"]) for w in written]
        assert {r["task"]: r["verdict"] for r in rows} == verdicts
        healthy = get(v.url + "api/runs/0/rows?verdict=healthy")["total"]
        assert healthy == sum(v == "healthy" for v in verdicts.values())
        assert get(v.url + "api/runs")["runs"][0]["metrics_file"] == "out_aggregate_metrics.json"
        assert get(v.url + "api/runs")["runs"][0]["key_metrics"]  # the collect's metrics file, beside it


def test_bad_requests_name_what_is_wrong(two_runs: Path) -> None:
    with Viewer([two_runs]) as v:
        loaded(v, 2)
        code, body = refused(v.url + "api/runs/0/rows?reward_min=high&task=x&failure=boom")
        assert code == 400
        assert {e["field"] for e in body["violations"]} == {"reward_min", "task", "failure"}
        assert "known: any, none, invalid_request" in body["error"]
        assert refused(v.url + "api/runs/9/rows")[0] == 404
        assert refused(v.url + "api/runs/0/rows?limit=100000")[0] == 400
        assert refused(v.url + "api/compare?a=0&b=1&agent_a=nobody")[1]["error"].startswith("no agent 'nobody'")
        assert refused(v.url + "api/../../etc/passwd")[0] == 404
        assert refused(v.url + "api/runs", method="POST")[0] == 405
        # a page of another site reaching the viewer by a rebound name is refused by its Host
        code, body = refused(v.url + "api/runs", headers={"Host": "attacker.example:80"})
        assert code == 403 and "not this viewer's" in body["error"]


def test_the_page_is_locked_to_its_own_script(two_runs: Path) -> None:
    with Viewer([two_runs]) as v:
        loaded(v, 2)
        with urllib.request.urlopen(v.url, timeout=30) as res:
            csp = res.headers["content-security-policy"]
            page = res.read().decode()
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "connect-src 'self'" in csp
        assert "<script>" not in page  # no inline script: the policy forbids it
        script = (Path(__file__).parents[2] / "gym_metrics" / "view" / "static" / "app.js").read_text()
        assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "eval(" not in script
        rows = get(v.url + "api/runs/0/rows?limit=1")["rows"]
        assert XSS in get(v.url + f"api/runs/0/rollouts/{rows[0]['line']}")["row"]["judge_notes"]  # data stays data


def test_an_evaluation_result_beside_its_input(tmp_path: Path) -> None:
    """`evaluate`'s `<stem>_<scorer>_results.json` is a run of scored rows: its aggregate scores,
    its rows filtered by a score, each beside the input row it scored; a broken result file is
    said on its run and does not hide the others."""
    import shutil

    from gym_metrics import cli

    cases = Path(shutil.copy(Path(__file__).parents[1] / "data" / "tool_call_accuracy" / "cases.jsonl", tmp_path / "cases.jsonl"))
    assert cli.main(["evaluate", "--scorer", "tool_call_accuracy", "--input", str(cases)]) == 0
    result = json.loads((tmp_path / "cases_tool_call_accuracy_results.json").read_text())
    (tmp_path / "broken_x_results.json").write_text("{not json")
    with Viewer([tmp_path / "cases_tool_call_accuracy_results.json", tmp_path / "broken_x_results.json"]) as v:
        runs = get(v.url + "api/runs")["runs"]
        assert runs[0]["kind"] == "results" and runs[0]["rows"] == len(result["row_scores"]) and runs[0]["input_file"] == "cases.jsonl"
        assert runs[0]["aggregate_scores"] == result["aggregate_scores"]
        assert "broken_x_results.json is not a scorer results file" in runs[1]["error"]
        name = result["aggregate_scores"][0]["name"]
        low = [r["index"] for r in result["row_scores"] if r["scores"].get(name) is not None and r["scores"][name] <= 0.5]
        page = get(v.url + f"api/runs/0/scores?score={name}&max=0.5&limit=500")
        assert [r["index"] for r in page["rows"]] == low and page["total"] == len(low)
        inputs = [json.loads(line) for line in cases.read_text().splitlines() if line.strip()]
        one = get(v.url + f"api/runs/0/scores/{len(inputs) - 1}")
        assert one["input"] == inputs[-1] and one["entry"] == result["row_scores"][-1] and one["next"] is None
        assert refused(v.url + f"api/runs/0/scores?min=0.5")[1]["violations"] == [{"field": "min", "reason": "needs score=NAME"}]
        assert refused(v.url + "api/runs/0/scores?score=nope")[0] == 400
        assert refused(v.url + f"api/runs/0/scores/{len(inputs)}")[0] == 404


def test_a_file_that_cannot_be_read_does_not_stop_the_others(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        path.write_text(json.dumps(row("x", 0, 0, 1.0)) + "\n")
    with Viewer([a, b]) as v:
        loaded(v, 2)
        a.unlink()
        a.mkdir()  # a folder now stands where the file was
        with b.open("a") as f:
            f.write(json.dumps(row("x", 1, 0, 0.0)) + "\n")
        runs = until(lambda: (r := get(v.url + "api/runs")["runs"])[1]["rows"] == 2 and r[0]["error"] and r)
        assert "IsADirectoryError" in runs[0]["error"]
        a.rmdir()
        a.write_text(json.dumps(row("y", 5, 0, 1.0)) + "\n")  # back, as another file: read afresh
        until(lambda: (r := get(v.url + "api/runs")["runs"][0])["error"] is None and [x["name"] for x in r["agents"]] == ["y"])


def test_a_file_removed_while_viewed_says_so_and_comes_back(tmp_path: Path) -> None:
    """It showed as an empty run with no word of why (its rows dropped silently)."""
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(row("x", 0, 0, 1.0)) + "\n" + json.dumps(row("x", 1, 0, 0.0)) + "\n")
    with Viewer([path]) as v:
        loaded(v, 2)
        path.unlink()
        run = until(lambda: (r := get(v.url + "api/runs")["runs"][0])["error"] and r)
        assert run["rows"] == 0 and "FileNotFoundError" in run["error"] and "run.jsonl" in run["error"]
        assert get(v.url + "api/runs/0/rows?limit=50")["rows"] == []
        path.write_text(json.dumps(row("y", 3, 0, 1.0)) + "\n")
        run = until(lambda: (r := get(v.url + "api/runs")["runs"][0])["error"] is None and r["rows"] == 1 and r)
        assert [a["name"] for a in run["agents"]] == ["y"]

def test_a_finished_file_without_a_final_newline_infinite_rewards_and_a_cut_emoji(tmp_path: Path) -> None:
    """Its last row was never shown ("reading 67%" for ever); an infinite reward was counted as
    passing and made the mean null where the metrics file leaves it out; a row holding a lone
    surrogate (an emoji cut in half) answered 500."""
    path = tmp_path / "run.jsonl"
    lines = [json.dumps(row("a", t, 0, r)) for t, r in enumerate([1.0, 0.0, float("inf"), 0.5])]
    cut = json.dumps(row("a", 4, 0, 1.0, extra={"note": "half \ud83d"}))  # json writes it as \ud83d: valid JSON, no UTF-8
    path.write_text("\n".join([*lines, cut]))  # no newline after the last
    with Viewer([path]) as v:
        [run] = loaded(v)
        assert run["rows"] == 5
        [agent] = run["agents"]
        assert agent["measured"] == 4 and agent["mean_reward"] == (1.0 + 0.0 + 0.5 + 1.0) / 4
        rows = get(v.url + "api/runs/0/rows?limit=50")["rows"]
        assert [r["reward"] for r in rows] == [1.0, 0.0, None, 0.5, 1.0]
        assert get(v.url + f"api/runs/0/rollouts/{rows[-1]['line']}")["row"]["note"] == "half \ud83d"


def test_scores_pair_with_their_input_rows_past_whitespace_lines(tmp_path: Path) -> None:
    """evaluate skips a whitespace-only or CRLF blank line; the viewer counted it as an input
    row, so every later score was shown beside the wrong row."""
    from gym_metrics import cli

    cases = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "tool_call_accuracy" / "cases.jsonl").read_text().splitlines() if line.strip()][:4]
    src = tmp_path / "cases.jsonl"
    src.write_bytes(b"\n".join([json.dumps(cases[0]).encode(), b"   ", b"\r", json.dumps(cases[1]).encode(), b"\t",
                                json.dumps(cases[2]).encode(), json.dumps(cases[3]).encode()]) + b"\n")  # fmt: skip
    assert cli.main(["evaluate", "--scorer", "tool_call_accuracy", "--input", str(src)]) == 0
    with Viewer([tmp_path / "cases_tool_call_accuracy_results.json"]) as v:
        assert [get(v.url + f"api/runs/0/scores/{i}")["input"] for i in range(4)] == cases


def test_a_file_copied_over_in_place_is_read_afresh(tmp_path: Path) -> None:
    """A longer file copied over the indexed one (same inode, same first bytes) kept the old
    rows listed beside the new file's bytes."""
    import shutil

    path, old, new = tmp_path / "run.jsonl", tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    first = json.dumps(row("first", 99, 0, 0.5)) + "\n"  # both files open with it: their first 256 bytes agree
    old.write_text(first + "".join(json.dumps(row("old", t, 0, 0.0)) + "\n" for t in range(5)))
    new.write_text(first + "".join(json.dumps(row("new", t, 0, 1.0)) + "\n" for t in range(8)))
    shutil.copyfile(old, path)
    with Viewer([path]) as v:
        assert [a["name"] for a in loaded(v)[0]["agents"]] == ["first", "old"]
        shutil.copyfile(new, path)  # in place: the same inode, the same head, longer
        until(lambda: [a["name"] for a in get(v.url + "api/runs")["runs"][0]["agents"]] == ["first", "new"] or None)
        assert [a["rows"] for a in get(v.url + "api/runs")["runs"][0]["agents"]] == [1, 8]


def test_a_run_page_is_not_sent_its_whole_metrics_file_each_poll(tmp_path: Path) -> None:
    """The page polls its run every 1.5 s and was sent the whole metrics file each time (67 MB
    for 500k rollouts): only a metrics file without its rollouts is shown whole."""
    from gym_metrics import cli

    write_run(tmp_path / "run.jsonl", "a", tasks=20, repeats=2, reward=lambda t, r: float(t % 2))
    assert cli.main(["aggregate", str(tmp_path / "run.jsonl"), "-q"]) == 0
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "old_aggregate_metrics.json").write_bytes((tmp_path / "run_aggregate_metrics.json").read_bytes())
    with Viewer([tmp_path / "run.jsonl", alone / "old_aggregate_metrics.json"]) as v:
        loaded(v)
        polled = get(v.url + "api/runs/0")
        assert "metrics" not in polled and polled["key_metrics"]["a"]["mean/reward"] == 0.5
        assert get(v.url + "api/runs/1")["metrics"][0]["agent_ref"] == {"name": "a"}


def test_text_search_finds_non_ascii_text_as_typed_raw_or_escaped(tmp_path: Path) -> None:
    """'ÉCOLE' missed its raw UTF-8 row, 'ΑΘΗΝΑ' found nothing, '😀' missed the row json wrote
    with ASCII escapes (a surrogate pair, where Python's ascii() writes \\U0001f600)."""
    texts = [("ÉCOLE normale", False), ("ÉCOLE normale", True), ("smile 😀 here", False), ("smile 😀 here", True), ("ΑΘΗΝΑ city", False)]
    lines = [json.dumps(row("a", i, 0, 1.0, extra={"note": text}), ensure_ascii=escaped) for i, (text, escaped) in enumerate(texts)]
    path = tmp_path / "u.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with Viewer([path]) as v:
        loaded(v)
        found = {q: [r["task"] for r in get(v.url + "api/runs/0/rows?" + urllib.parse.urlencode({"q": q, "limit": 50}))["rows"]]
                 for q in ("ÉCOLE", "école", "😀", "ΑΘΗΝΑ", "normale")}  # fmt: skip
    assert found == {"ÉCOLE": [0, 1], "école": [0, 1], "😀": [2, 3], "ΑΘΗΝΑ": [4], "normale": [0, 1]}


def test_masked_and_failed_rows_are_out_of_the_viewers_numbers_as_out_of_the_metrics(tmp_path: Path) -> None:
    """The agent card, the task list and the side-by-side paired difference counted masked rows
    and failed verifies that carry a reward: "mean reward 0.5" beside the metrics file's 1.0,
    and a paired difference of 0.333 where `compare` says 0. They count what the metrics count."""
    from gym_metrics import cli
    from gym_metrics.compare import compare_paired
    from gym_metrics.rollouts import read_rollouts

    rows = []
    for t in range(4):
        for r in range(3):
            extra = {"mask_sample": True} if r == 1 else {"_gm_error": "timeout"} if r == 2 and t < 2 else {}
            rows.append({"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": 0.0 if extra else 1.0, **extra,
                         "responses_create_params": {"input": "q"}})  # fmt: skip
    masked = tmp_path / "masked.jsonl"
    masked.write_text("".join(json.dumps(x) + "\n" for x in rows))
    other = tmp_path / "plain.jsonl"
    other.write_text("".join(json.dumps({**x, "reward": float(x["_ng_task_index"] % 2)}) + "\n" for x in rows if "mask_sample" not in x and "_gm_error" not in x))
    assert cli.main(["aggregate", str(masked), "-q"]) == 0
    metrics = json.loads((tmp_path / "masked_aggregate_metrics.json").read_text())[0]["agent_metrics"]
    both = {"a": read_rollouts(masked, keep_rows=False).agents["a"], "b": read_rollouts(other, keep_rows=False).agents["a"]}
    expected = compare_paired(both, ["a", "b"]).comparisons[0]
    with Viewer([masked, other]) as v:
        loaded(v, 2)
        [agent] = get(v.url + "api/runs")["runs"][0]["agents"]
        tasks = get(v.url + "api/runs/0/tasks?limit=10")["tasks"]
        page = get(v.url + "api/runs/0/rows?limit=20")["rows"]
        paired = get(v.url + "api/compare?a=0&b=1")["paired"]
    assert agent["mean_reward"] == metrics["mean/reward"] == 1.0 and agent["pass_rate"] == 1.0 and agent["measured"] == 6
    assert [t["mean_reward"] for t in tasks] == [1.0] * 4
    assert sum(r["masked"] for r in page) == 4 and len(page) == 12  # every row listed, the masked ones marked
    assert (paired["value_a"], paired["value_b"], paired["difference"]) == pytest.approx((expected.value_a, expected.value_b, expected.difference))


def test_failed_rows_count_0_where_the_metrics_file_counted_them_so(tmp_path: Path) -> None:
    """A metrics file written with `aggregate --count-errors-as-zero` scores each failed verify
    0 (masked or not); the viewer left them out all the same, its mean reward and pass rate
    above the key metrics beside them. It reads how the file counted (the file does not record
    the option: its tasks' rollout counts tell) and counts alike; the other file's agent, whose
    metrics left failures out, keeps leaving them out."""
    from gym_metrics import cli
    from gym_metrics.aggregate import apply_errors
    from gym_metrics.compare import compare_paired
    from gym_metrics.rollouts import read_rollouts

    def rows(agent: str) -> list[dict[str, Any]]:
        out = []
        for t in range(4):
            for r in range(3):
                extra = {"_gm_error": "timeout", **({"mask_sample": True} if t == 0 else {})} if r == 2 and t < 2 else {}
                out.append({"agent_ref": {"name": agent}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": 1.0, **extra})
        return out

    zero, left = tmp_path / "zero.jsonl", tmp_path / "left.jsonl"
    zero.write_text("".join(json.dumps(x) + "\n" for x in rows("a")))
    left.write_text("".join(json.dumps(x) + "\n" for x in rows("a")))
    assert cli.main(["aggregate", str(zero), "-q", "--count-errors-as-zero"]) == 0
    assert cli.main(["aggregate", str(left), "-q"]) == 0
    counted = json.loads((tmp_path / "zero_aggregate_metrics.json").read_text())[0]["agent_metrics"]
    plain = json.loads((tmp_path / "left_aggregate_metrics.json").read_text())[0]["agent_metrics"]
    assert counted["mean/reward"] == 10 / 12 and plain["mean/reward"] == 1.0
    as_zero = apply_errors(read_rollouts(zero, keep_rows=False).agents["a"], as_zero=True)  # the failed rows as the metrics counted them
    expected = compare_paired({"a": as_zero, "b": read_rollouts(left, keep_rows=False).agents["a"]}, ["a", "b"]).comparisons[0]
    with Viewer([zero, left]) as v:
        loaded(v, 2)
        runs = {r["name"]: r for r in get(v.url + "api/runs")["runs"]}
        ids = {name: r["id"] for name, r in runs.items()}
        tasks = get(v.url + f"api/runs/{ids['zero.jsonl']}/tasks?limit=10")["tasks"]
        paired = get(v.url + f"api/compare?a={ids['zero.jsonl']}&b={ids['left.jsonl']}")["paired"]
    [a_zero], [a_left] = runs["zero.jsonl"]["agents"], runs["left.jsonl"]["agents"]
    assert a_zero["mean_reward"] == pytest.approx(counted["mean/reward"]) and a_zero["measured"] == 12 and a_zero["errors"] == 2
    assert a_left["mean_reward"] == plain["mean/reward"] and a_left["measured"] == 10
    assert [t["mean_reward"] for t in tasks] == pytest.approx([2 / 3, 2 / 3, 1.0, 1.0])
    assert (paired["value_a"], paired["value_b"], paired["difference"]) == pytest.approx((expected.value_a, expected.value_b, expected.difference))
    assert paired["difference"] < 0


def test_a_folders_health_verdicts_show_on_the_files_they_are_of(tmp_path: Path) -> None:
    """`health a.jsonl` writes rollout_verdicts.jsonl in the folder; its verdicts name tasks and
    rollouts, not files, and b.jsonl beside it (never checked) showed a's verdicts on its own
    rows. `health` now lists its inputs beside the reports; NeMo Gym's reports without that
    list count only where the folder holds one rollouts file."""
    from gym_metrics.health import INPUTS_FILE, check_health

    a = tmp_path / "a.jsonl"
    a.write_bytes((DATA / "faults.jsonl").read_bytes())
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(row("other", t, r, 1.0)) + "\n" for t in range(3) for r in range(2)))
    check_health(a)

    def verdict_counts(v: Viewer) -> list[dict[str, int]]:
        return [agent["verdicts"] for run in loaded(v, 2) for agent in run["agents"]]

    with Viewer([a, b]) as v:
        counts = verdict_counts(v)
        on_b = get(v.url + "api/runs/1/rows?verdict=unhealthy")["total"]
    assert counts[0].get("unhealthy", 0) > 0 and counts[1] == {} and on_b == 0, counts
    (tmp_path / INPUTS_FILE).unlink()  # NeMo Gym's reports: two rollouts files here, so neither is known to be theirs
    with Viewer([a, b]) as v:
        assert verdict_counts(v) == [{}, {}]
    b.unlink()  # one rollouts file in the folder: the reports are its
    with Viewer([a]) as v:
        assert loaded(v)[0]["agents"][0]["verdicts"].get("unhealthy", 0) > 0


def test_a_row_nested_deep_is_its_text_and_a_search_of_an_empty_file_is_no_rows(tmp_path: Path) -> None:
    """A row nested 500 deep (valid JSON the reader takes) was a 500 with a RecursionError; a
    text search over an empty file (a collect that has not written yet) was a 500 too."""
    nested = "[" * 900 + "]" * 900
    deep = tmp_path / "deep.jsonl"
    deep.write_text(json.dumps(row("a", 0, 0, 1.0)) + "\n" + json.dumps(row("a", 0, 1, 1.0))[:-1] + f', "x": {nested}}}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with Viewer([deep, empty]) as v:
        until(lambda: get(v.url + "api/runs/0/rows?limit=5")["total"] == 2)
        shallow, nested_row = get(v.url + "api/runs/0/rollouts/1"), get(v.url + "api/runs/0/rollouts/2")
        searched = get(v.url + "api/runs/1/rows?limit=5&q=hello")
    assert shallow["row"]["_ng_rollout_index"] == 0 and shallow["raw"] is None
    assert nested_row["row"] is None and nested_row["raw"].endswith(nested + "}\n") and nested_row["cut"] is False
    assert searched == {"total": 0, "rows": [], "next": None, "scanned": 0}


def test_a_row_of_many_brackets_is_deep_only_when_it_nests_deep(monkeypatch: Any) -> None:
    """Without the compiled scanner (no compiler at install), `too_deep` counts a row's brackets:
    a shallow row of 300 one-item lists was shown as bare text, not laid out."""
    import sys

    from gym_metrics.view import _rollout

    monkeypatch.setitem(sys.modules, "gym_metrics._util.jsonscan", None)  # (its import fails)
    assert not _rollout.deep(json.dumps({"xs": [[i] for i in range(300)]}).encode())
    assert _rollout.deep(("[" * 201 + "]" * 201).encode()) and not _rollout.deep(("[" * 200 + "]" * 200).encode())
