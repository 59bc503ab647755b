"""The viewer in a real headless Chromium (issue 40 item 3), driven over the DevTools protocol:
open the runs, a run, filter it, open one rollout, compare two runs, watch a file a writer is
appending to; no console error, no request outside the viewer's own server, no text of a row
run as markup; a screenshot of each view (the docs' images with UPDATE_DOCS_SCREENSHOT=1)."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from gym_metrics import cli
from gym_metrics.report import open_in_chromium
from gym_metrics.view import Viewer, _query

from _viewer_data import XSS, row, write_run

DATA = Path(__file__).parents[1] / "data" / "health"
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
SHOTS = ("view-runs", "view-run", "view-rollout", "view-compare")

UNTIL = """const until = async (probe, what) => { const end = Date.now() + 30000;
  while (Date.now() < end) { const v = probe(); if (v) return v; await new Promise(r => setTimeout(r, 50)); }
  throw new Error('the page did not show ' + what); };
const all = (sel) => [...document.querySelectorAll(sel)];"""


def step(body: str) -> str:
    return f"(async () => {{ {UNTIL}\n{body} }})()"


RUNS = step("""await until(() => all('#runs tr[data-run]').length === 5 && !document.body.textContent.includes('reading'), 'the runs');
  return all('#runs tr[data-run] td:first-child a').map(a => a.textContent);""")

RUN = step("""location.hash = '#/run/0';
  await until(() => all('#rollout-table tr[data-line]').length === 50 && all('#agents .card').length === 1, 'run 0');
  return {agent: document.querySelector('#agents .card h3').textContent, tasks: all('#tasks tr').length - 1,
          pager: document.querySelector('#rollouts .pager span').textContent};""")

FILTER = step("""const form = document.getElementById('filters');
  form.elements.reward_max.value = '0'; form.elements.agent.value = 'policy-a';
  form.requestSubmit();
  await until(() => location.hash.includes('reward_max=0') && all('#rollout-table tr[data-line]').length === 10, 'the filtered rows');
  return all('#rollout-table tr[data-line] td:nth-child(5)').map(td => td.textContent);""")

SEARCH = step("""const form = document.getElementById('filters');
  form.elements.reward_max.value = ''; form.elements.q.value = 'what is 2 +';
  form.requestSubmit();
  await until(() => document.getElementById('search-info')?.textContent.includes('searched to the end'), 'the search');
  return {lines: all('#rollout-table tr[data-line]').map(tr => tr.dataset.line), info: document.getElementById('search-info').textContent};""")

ROLLOUT = step("""location.hash = '#/run/2';
  await until(() => all('#rollout-table tr[data-line]').length === 6, 'run 2');
  document.querySelector('#rollout-table tr[data-line]').click();
  await until(() => document.getElementById('model-calls'), 'the rollout');
  return {title: document.querySelector('h1').textContent, health: document.querySelector('#health .badge').textContent,
          tools: all('#tool-calls tr').length - 1, calls: all('#model-calls details > summary').length,
          fields: all('#fields th').map(th => th.textContent), raw: document.querySelector('#raw pre').textContent.length > 1000};""")

XSS_ROLLOUT = step("""location.hash = '#/run/0/rollout/1';
  await until(() => document.querySelector('h1').textContent === 'policy-a · task 0 · rollout 0' && document.querySelector('#conversation .call'), 'the first rollout');
  const text = document.getElementById('main').textContent;
  return {shown: text.split('onerror=').length - 1, pwned: window.__pwned ?? null,
          injected: document.querySelectorAll('main img, main script').length,
          fold: all('#raw details, #conversation details').length};""")

COMPARE = step("""location.hash = '#/';
  await until(() => document.getElementById('compare-form'), 'the compare form');
  document.getElementById('cmp-a').value = '0'; document.getElementById('cmp-b').value = '1';
  document.getElementById('compare-form').requestSubmit();
  await until(() => document.getElementById('compare-table') && document.getElementById('paired'), 'the comparison');
  return {p2f: document.getElementById('pass-to-fail').textContent, f2p: document.getElementById('fail-to-pass').textContent,
          first: all('#compare-table tr')[1].textContent, rows: all('#compare-table tr').length - 1};""")

RESULTS = step("""location.hash = '#/run/4';
  await until(() => all('#scores-table tr[data-row]').length === 15, 'the scored rows');
  const aggregate = all('#aggregate-scores tr').length - 1;
  document.querySelector('#scores-table tr[data-row="3"]').click();
  await until(() => document.getElementById('scores') && document.querySelector('h1').textContent === 'row 3', 'the scored row');
  return {aggregate, input: document.querySelector('#raw pre').textContent.includes('"tool_calls"')};""")

LIVE = step("""location.hash = '#/run/3';
  await until(() => all('#rollout-table tr[data-line]').length === 12, 'the rows the writer appended');
  return document.querySelector('#rollouts .pager span').textContent;""")


@pytest.mark.slow
def test_the_viewer_in_chromium(tmp_path: Path, chromium: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_query, "SEARCH_BYTES", 4000)  # a search takes many requests: the page goes on by itself
    write_run(tmp_path / "a.jsonl", "policy-a", tasks=30, repeats=2, reward=lambda t, r: float(t % 3 != 0 or r == 0))
    write_run(tmp_path / "b.jsonl", "policy-b", tasks=30, repeats=2, reward=lambda t, r: float(t % 5 != 0))
    (tmp_path / "c_trajectories.jsonl").write_bytes((DATA / "clean.jsonl").read_bytes())
    live = tmp_path / "d_live.jsonl"
    live.write_text(json.dumps(row("live", 0, 0, 1.0)) + "\n")
    evaluated = tmp_path / "eval"
    evaluated.mkdir()
    cases = Path(shutil.copy(Path(__file__).parents[1] / "data" / "tool_call_accuracy" / "cases.jsonl", evaluated / "cases.jsonl"))
    assert cli.main(["evaluate", "--scorer", "tool_call_accuracy", "--input", str(cases)]) == 0
    stop = threading.Event()

    def writer() -> None:  # bounded: 11 rows, one every 0.3 s
        for n in range(1, 12):
            if stop.wait(0.3):
                return
            with live.open("a") as f:
                f.write(json.dumps(row("live", n, 0, float(n % 2))) + "\n")

    shots = {name: tmp_path / f"{name}.png" for name in SHOTS}
    with Viewer([tmp_path, evaluated / "cases_tool_call_accuracy_results.json"]) as v:
        appending = threading.Thread(target=writer)
        try:
            load = open_in_chromium(
                v.url, binary=chromium, width=1280, height=900,
                evaluate=[(RUNS, shots["view-runs"]), (RUN, shots["view-run"]), FILTER, SEARCH, (ROLLOUT, shots["view-rollout"]),
                          XSS_ROLLOUT, (COMPARE, shots["view-compare"]), RESULTS, "0"],
            )  # fmt: skip
            appending.start()
            live_page = open_in_chromium(v.url, binary=chromium, evaluate=[LIVE])
        finally:
            stop.set()
            if appending.is_alive():
                appending.join()
    assert load.console_errors == [] and live_page.console_errors == []
    assert [u for u in load.requests + live_page.requests if not u.startswith(v.url)] == []
    assert any(u.startswith(v.url + "api/runs/0/rows") for u in load.requests)  # the harness sees the page's requests
    runs, run, filtered, searched, opened, xss, compare, results, _ = load.values
    assert runs == ["a.jsonl", "b.jsonl", "c_trajectories.jsonl", "d_live.jsonl", "cases_tool_call_accuracy_results.json"]
    assert results == {"aggregate": 1, "input": True}
    assert run == {"agent": "policy-a", "tasks": 30, "pager": "1–50 of 60 rollouts"}
    assert filtered == ["0"] * 10  # rollout 1 of the tasks t % 3 == 0
    assert searched == {"lines": ["5", "6"], "info": "2 match(es) in rows 1–60 of 60 (searched to the end)"}
    assert sum(u.startswith(v.url + "api/runs/0/rows?agent=policy-a&q=") for u in load.requests) > 5  # it went on by itself
    assert opened["title"] == "agent · task 0 · rollout 0" and opened["health"] == "healthy"
    assert opened["tools"] == 3 and opened["calls"] >= 4 and opened["raw"] is True
    assert {"reward", "final_count", "agent_ref", "_ng_task_index"} <= set(opened["fields"])
    assert xss["shown"] >= 3 and xss["pwned"] is None and xss["injected"] == 0  # the markup is text, not elements
    a_pass, b_pass = {t for t in range(30) if t % 3 != 0}, {t for t in range(30) if t % 5 != 0}
    assert (compare["p2f"], compare["f2p"]) == (str(len(a_pass - b_pass)), str(len(b_pass - a_pass)))
    assert "pass→fail" in compare["first"] or "fail→pass" in compare["first"]
    assert compare["rows"] == 30
    assert live_page.values == ["1–12 of 12 rollouts"]
    for path in shots.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000, path
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for name, path in shots.items():
            shutil.copyfile(path, DOCS_IMG / f"{name}.png")
    time.sleep(0)  # nothing left running: the viewer and the writer are stopped above
