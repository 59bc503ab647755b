"""The Rollouts section: per task, its rollouts with their value; per rollout, the prompt, each
turn (reasoning collapsed, text, tool calls beside their outputs) and the final answer.

Plain HTML (`details`/`summary`: no script), every text from the file escaped, so a model's
output that holds markup is shown as text and never runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import numpy as np

from gym_metrics.report._bounds import short
from gym_metrics.report._data import AgentData
from gym_metrics.report._episode import Call, EpisodeView, Turn
from gym_metrics.report import _rollout_rows as caps
from gym_metrics.report._rollout_rows import RolloutSample, Shown
from gym_metrics.report._sections import section
from gym_metrics.report._svg import fmt

CSS = """
#rollouts details{margin:4px 0}#rollouts summary{cursor:pointer}#rollouts details.task>summary{font-weight:600;padding:3px 0}
#rollouts details.task>div{margin-left:16px}#rollouts details.ro{border:1px solid #d0d7de;border-radius:6px;padding:4px 10px;background:#fff}
#rollouts details.ro[open]{background:#fcfcfd}.ep{margin:6px 0 4px}.ep pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;
font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;max-height:420px;overflow:auto}
.msg{border-left:3px solid #8c959f;padding:2px 10px;margin:6px 0;background:#f6f8fa}.msg.user{border-color:#0969da}
.msg.system{border-color:#8250df}.msg.assistant{border-color:#57606a;background:#fff}.msg.final{border-color:#1a7f37;background:#f0fff4}
.role{font-size:11px;font-weight:600;color:#57606a;text-transform:uppercase;letter-spacing:.04em}
.turn{border-top:1px dashed #d0d7de;margin-top:8px;padding-top:4px}.turn-h{font-size:12px;color:#57606a;font-weight:600}
details.reasoning{color:#57606a;margin:4px 0}details.reasoning>summary{font-size:12px;font-style:italic}
.call{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:8px;margin:6px 0}
.call>div{border:1px solid #d0d7de;border-radius:4px;padding:2px 8px;background:#fff}.call .args{border-left:3px solid #bf8700}
.call .out{border-left:3px solid #1a7f37}.call .out.err{border-left-color:#cf222e;background:#fff5f5}.call .out.none{border-left-color:#8c959f}
.cid{font-weight:400;color:#8c959f;text-transform:none}.fn{text-transform:none;font:600 12px ui-monospace,Menlo,Consolas,monospace;color:#1d1d1f}.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;font-weight:600}
.b-hi{background:#dafbe1;color:#116329}.b-lo{background:#ffebe9;color:#a40e26}.b-mid{background:#fff8c5;color:#7d4e00}.b-na{background:#eaeef2;color:#57606a}
.b-err{background:#cf222e;color:#fff;text-transform:uppercase;font-size:10px}.ro-notes{color:#a40e26;font-size:12px;margin:4px 0}
"""


def rollouts(agents: Sequence[AgentData], sample: RolloutSample, field: str) -> str:
    """The section for the drawn agents of the metrics file (not a --compare file's)."""
    own = [a for a in agents if not a.compared and sample.tasks.get(a.own_name)]
    several = len(own) > 1
    body = "".join(_agent(a, sample, field, several) for a in own)
    if not body:
        body = f'<p class="empty">No rollout rows of these agents in {escape(sample.path.name)}.</p>'
    return section("rollouts", "Rollouts", _caps(sample) + body, _note(sample), wide=True)


def _note(sample: RolloutSample) -> str:
    return (f"From {sample.path.name}: the first {caps.ROLLOUTS_PER_TASK} rollouts of each of the first {caps.MAX_TASKS} tasks "
            f"in the file, read from at most its first {caps.MAX_READ_BYTES / 1e6:g} MB. Open a task, then a rollout: the prompt, each turn (reasoning collapsed, "
            "tool calls beside their outputs, an error output marked) and the final answer.")  # fmt: skip


def _caps(sample: RolloutSample) -> str:
    """What was left out, said on the page."""
    said = []
    if sample.stopped_early:
        said.append(f"Capped: only the first {sample.bytes_read / 1e6:.1f} MB of the rollouts file were read.")
    if sample.tasks_left_out:
        said.append(f"Capped: tasks past the first {caps.MAX_TASKS} are not shown.")
    if sample.skipped:
        said.append(f"{sample.skipped:,} lines read are not rollout rows of these agents and are not shown.")
    return "".join(f'<p class="note"><b>{escape(s)}</b></p>' for s in said)


def _agent(a: AgentData, sample: RolloutSample, field: str, several: bool) -> str:
    tasks = sample.tasks[a.own_name]
    head = f"<h3>{escape(a.name)}</h3>" if several else ""
    return head + "".join(_task(a, t, rows, sample.seen.get((a.own_name, t), len(rows)), field) for t, rows in tasks.items())


def _task(a: AgentData, task: int, rows: list[Shown], seen: int, field: str) -> str:
    i = int(np.searchsorted(a.tasks, task))
    mean = float(a.task_mean[i]) if i < len(a.tasks) and a.tasks[i] == task else float("nan")
    count = f"{len(rows)} rollouts" + (f" shown of {seen} read" if seen > len(rows) else "")
    summary = f"task {task} · mean {escape(short(field))} {fmt(mean)} · {count}"
    inner = "".join(_rollout(r, field) for r in rows)
    return f'<details class="task" data-task="{task}"><summary>{summary}</summary><div>{inner}</div></details>'


def _badge(value: float | None, field: str) -> str:
    if value is None:
        return f'<span class="badge b-na">{escape(short(field))} n/a</span>'
    cls = "b-hi" if value >= 1 else "b-lo" if value <= 0 else "b-mid"
    return f'<span class="badge {cls}">{escape(short(field))} {fmt(value)}</span>'


def _rollout(r: Shown, field: str) -> str:
    ep = r.episode
    calls = sum(len(t.calls) for t in ep.turns)
    errors = sum(c.error for t in ep.turns for c in (*t.calls, *t.outputs))
    facts = [f"rollout {r.rollout}", f"{len(ep.turns)} turn{'s' * (len(ep.turns) != 1)}", f"{calls} tool call{'s' * (calls != 1)}"]
    if errors:
        facts.append(f"{errors} failed")
    if r.tokens is not None:
        facts.append(f"{fmt(r.tokens)} tokens")
    summary = _badge(r.value, field) + " " + escape(" · ".join(facts))
    return f'<details class="ro" data-rollout="{r.rollout}"><summary>{summary}</summary><div class="ep">{_episode(ep)}</div></details>'


def _episode(ep: EpisodeView) -> str:
    parts = [_message(m.role, m.text) for m in ep.prompt]
    if ep.tools:
        parts.append(f'<p class="note">tools: {escape(short(", ".join(ep.tools), 1000))}</p>')
    for n, turn in enumerate(ep.turns, 1):
        parts.append(_turn(n, turn, final=ep.final is not None and n == len(ep.turns)))
    if not ep.turns:
        parts.append('<p class="empty">No answer in this row.</p>')
    if ep.cut:
        parts.append(f'<p class="note">{ep.cut:,} more items not shown.</p>')
    if ep.notes:
        parts.append("".join(f'<p class="ro-notes">{escape(n)}</p>' for n in ep.notes))
    return "".join(parts)


def _message(role: str, text: str, cls: str | None = None) -> str:
    kind = cls or (role if role in ("user", "system", "assistant") else "other")
    return f'<div class="msg {kind}"><div class="role">{escape(role)}</div><pre>{_text(text)}</pre></div>'


def _turn(n: int, turn: Turn, final: bool) -> str:
    parts = [f'<div class="turn-h">turn {n}</div>']
    parts += [f'<details class="reasoning"><summary>reasoning</summary><pre>{_text(r)}</pre></details>' for r in turn.reasoning]
    parts += [_message("final answer", t, "final") if final else _message("assistant", t) for t in turn.texts]
    parts += [_message(m.role, m.text) for m in turn.others]
    parts += [_call(c) for c in (*turn.calls, *turn.outputs)]
    return f'<div class="turn">{"".join(parts)}</div>'


def _call(c: Call) -> str:
    cid = f' <span class="cid">{escape(c.call_id)}</span>' if c.call_id and c.call_id != "None" else ""
    args = f'<div class="args"><div class="role">call <span class="fn">{escape(c.name)}</span>{cid}</div><pre>{_text(c.arguments)}</pre></div>'
    if c.output is None:
        out = '<div class="out none"><div class="role">output</div><p class="empty">no output in the trajectory</p></div>'
    else:
        mark = ' <span class="badge b-err">error</span>' if c.error else ""
        out = f'<div class="out{" err" if c.error else ""}"><div class="role">output{mark}</div><pre>{_text(c.output)}</pre></div>'
    return f'<div class="call">{args}{out}</div>'


def _text(text: str) -> str:
    """Text from the file as element content: `&`, `<` and `>` escaped (quotes need not be)."""
    return escape(text, quote=False)
