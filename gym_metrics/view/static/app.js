// gym-metrics view: the page over the viewer's JSON API. Every text from the data goes into the
// page as text (textContent, never HTML), so nothing a model wrote can run.
"use strict";

const POLL_MS = 1500;
const FOLD_CHARS = 2000;
const PAGE = 50;
const $main = () => document.getElementById("main");
let poller = null;
let generation = 0;

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// replaceChildren without the absent parts (null would be written as the text "null")
function put(el, ...kids) { el.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false)); }

async function api(path) {
  const res = await fetch("/api/" + path, {headers: {accept: "application/json"}});
  const body = await res.json();
  if (!res.ok) {
    const more = (body.violations || []).map((v) => `${v.field}: ${v.reason}`).join("; ");
    throw new Error(body.error + (more && !body.error.includes(more) ? ` (${more})` : ""));
  }
  return body;
}

function num(x, digits = 3) {
  if (x === null || x === undefined) return "–";
  if (typeof x !== "number") return String(x);
  return Number.isInteger(x) ? x.toLocaleString("en-US") : x.toFixed(digits);
}
const pct = (x) => (x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%");
const badge = (text, kind) => h("span", {class: "badge b-" + (kind || text)}, text);
const status = (text) => { document.getElementById("status").textContent = text; };
const where = (text) => { document.getElementById("where").textContent = text; };

function folded(text, cls) {
  const s = typeof text === "string" ? text : JSON.stringify(text, null, 2);
  const pre = h("pre", {class: cls || null});
  if (s.length <= FOLD_CHARS) { pre.textContent = s; return pre; }
  pre.textContent = s.slice(0, FOLD_CHARS);
  const more = h("button", {type: "button", class: "unfold", onclick: () => { pre.textContent = s; more.remove(); }},
    `show all ${s.length.toLocaleString("en-US")} characters`);
  return h("div", {}, pre, more);
}
const jsonBlock = (value) => folded(JSON.stringify(value, null, 2), "json");
function fold(title, body, open) { return h("details", {open: open || null}, h("summary", {}, title), body); }
function errorBox(err) { return h("div", {class: "error-box", role: "alert"}, String(err.message || err)); }

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, query] = raw.split("?");
  return {parts: path.split("/").filter(Boolean), params: new URLSearchParams(query || "")};
}
function go(parts, params) {
  const q = params && params.toString();
  location.hash = "#/" + parts.join("/") + (q ? "?" + q : "");
}

async function route() {
  const mine = ++generation;
  clearInterval(poller);
  poller = null;
  const {parts, params} = parseHash();
  const main = $main();
  try {
    if (parts.length === 0) await home(main, mine);
    else if (parts[0] === "run" && parts.length === 2) await runPage(main, parts[1], params, mine);
    else if (parts[0] === "run" && parts[2] === "rollout") await rolloutPage(main, parts[1], parts[3]);
    else if (parts[0] === "run" && parts[2] === "score") await scoredRowPage(main, parts[1], parts[3]);
    else if (parts[0] === "compare") await comparePage(main, parts[1], parts[2], params);
    else put(main, errorBox(new Error("no such page: " + location.hash)));
  } catch (err) {
    if (mine === generation) put(main, errorBox(err));
  }
}

function every(fn) { poller = setInterval(() => fn().catch((e) => status("update failed: " + e.message)), POLL_MS); }

function liveLabel(run) {
  if (run.file_size === undefined) return "";
  if (run.bytes < run.file_size) return `reading ${pct(run.bytes / run.file_size)}`;
  return "";
}

// ---- runs ------------------------------------------------------------------------------
async function home(main, mine) {
  where("");
  const draw = async () => {
    const {runs} = await api("runs");
    if (mine !== generation) return;
    const table = h("table", {id: "runs"},
      h("tr", {}, h("th", {}, "run"), h("th", {class: "num"}, "rollouts"), h("th", {}, "agents"), h("th", {}, "key metrics"), h("th", {}, "")),
      runs.map((r) => h("tr", {class: "click", "data-run": r.id, onclick: () => go(["run", r.id])},
        h("td", {}, h("a", {href: `#/run/${r.id}`}, r.name), r.metrics_file ? h("div", {class: "small muted"}, r.metrics_file) : null),
        h("td", {class: "num"}, num(r.rows)),
        h("td", {}, r.agents.map((a) => h("div", {}, a.name || "(no agent)", " ", h("span", {class: "muted small"},
          `mean reward ${num(a.mean_reward)} · pass ${pct(a.pass_rate)}`)))),
        h("td", {}, r.error ? h("span", {class: "badge b-err"}, r.error) : null,
          (r.aggregate_scores || []).slice(0, 4).map((a) => h("div", {class: "small"}, `${a.name}: mean ${num(a.mean)} (${num(a.count)} scored)`)),
          Object.entries(r.key_metrics || {}).map(([agent, km]) => h("div", {class: "small"}, agent + ": ",
          Object.entries(km).slice(0, 4).map(([k, v]) => `${k} ${num(v)}`).join(" · ")))),
        h("td", {}, liveLabel(r) ? badge(liveLabel(r), "live") : null))));
    const withRows = runs.filter((r) => r.kind === "rollouts");
    const pick = (id) => h("select", {id}, withRows.map((r) => h("option", {value: r.id}, r.name)));
    const a = pick("cmp-a"), b = pick("cmp-b");
    if (withRows.length > 1) b.value = withRows[1].id;
    const compare = withRows.length < 2 ? null : h("form", {class: "filters", id: "compare-form", onsubmit: (e) => {
      e.preventDefault(); go(["compare", a.value, b.value]); }},
      h("label", {}, "run A", a), h("label", {}, "run B", b), h("button", {type: "submit"}, "Compare side by side"));
    put(main, h("h1", {}, "Runs"), table, compare ? h("h2", {}, "Compare two runs") : null, compare);
    status(`${runs.length} run(s)`);
  };
  await draw();
  every(draw);
}

// ---- one run: agents, filters, tasks, rollouts -------------------------------------------
const FILTERS = ["agent", "task", "reward_min", "reward_max", "failure", "verdict", "q"];

async function runPage(main, id, params, mine) {
  const run = await api(`runs/${id}`);
  where(run.name);
  if (run.kind === "results") return resultsPage(main, id, run, params);
  const filterQuery = new URLSearchParams();
  for (const k of FILTERS) if (params.get(k)) filterQuery.set(k, params.get(k));
  const agents = h("div", {class: "cards", id: "agents"});
  const tasksBox = h("div", {id: "tasks"});
  const rowsBox = h("div", {id: "rollouts"});
  const header = h("div", {});
  put(main, header, agents, filterForm(id, run, params),
    h("div", {class: "split"}, h("div", {}, h("h2", {}, "Tasks"), tasksBox), h("div", {}, h("h2", {}, "Rollouts"), rowsBox)));
  if (run.file_size === undefined) {
    header.append(h("h1", {}, run.name), h("p", {class: "muted"}, "A metrics file without its rollouts file."), jsonBlock(run.metrics));
    return;
  }
  let offset = Number(params.get("offset") || 0), taskOffset = Number(params.get("task_offset") || 0), seen = -1;
  const draw = async (force) => {
    const r = await api(`runs/${id}`);
    if (mine !== generation) return;
    put(header, h("h1", {}, r.name), r.error ? errorBox(new Error(r.error)) : null, h("div", {class: "muted small"}, `${num(r.rows)} rollouts · ${num(r.lines)} lines · `,
      r.bad_lines_count ? h("span", {class: "badge b-err"}, `${r.bad_lines_count} bad line(s)`) : "no bad lines", " ",
      liveLabel(r) ? badge(liveLabel(r), "live") : null),
      r.bad_lines && r.bad_lines.length ? fold("bad lines", h("ul", {}, r.bad_lines.map((b) => h("li", {}, `line ${b.line}: ${b.reason}`)))) : null);
    put(agents, ...r.agents.map((a) => agentCard(a, (r.key_metrics || {})[a.name])));
    status(`${num(r.rows)} rollouts` + (r.bytes < r.file_size ? " (reading…)" : ""));
    if (!force && r.rows === seen) return;
    seen = r.rows;
    await drawTasks(id, filterQuery, taskOffset, tasksBox, (o) => { taskOffset = o; draw(true); });
    await drawRows(id, filterQuery, offset, rowsBox, (o) => { offset = o; draw(true); });
  };
  await draw(true);
  every(() => draw(false));
}

function agentCard(a, keyMetrics) {
  const kv = h("div", {class: "kv"},
    h("span", {}, "rollouts"), h("span", {}, num(a.rows)),
    h("span", {}, "mean reward"), h("span", {}, num(a.mean_reward)),
    h("span", {}, "pass rate"), h("span", {}, pct(a.pass_rate)),
    h("span", {}, "errors"), h("span", {}, num(a.errors)),
    Object.entries(a.verdicts || {}).map(([v, n]) => [h("span", {}, v), h("span", {}, num(n))]),
    Object.entries(keyMetrics || {}).map(([k, v]) => [h("span", {}, k), h("span", {}, num(v))]));
  return h("div", {class: "card"}, h("h3", {}, a.name || "(no agent)"), kv);
}

function filterForm(id, run, params) {
  const field = (name, el) => { el.name = name; el.value = params.get(name) || ""; return el; };
  const options = (values) => [h("option", {value: ""}, "any"), values.map((v) => h("option", {value: v}, v))];
  const form = h("form", {class: "filters", id: "filters", onsubmit: (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v !== "") p.set(k, v);
    go(["run", id], p);
  }},
    h("label", {}, "agent", field("agent", h("select", {}, options((run.agents || []).map((a) => a.name))))),
    h("label", {}, "task", field("task", h("input", {type: "number", min: 0, step: 1}))),
    h("label", {}, "reward ≥", field("reward_min", h("input", {type: "number", step: "any"}))),
    h("label", {}, "reward ≤", field("reward_max", h("input", {type: "number", step: "any"}))),
    h("label", {}, "failure", field("failure", h("select", {}, options(["any", "none", "invalid_request", "verify_failed", "timeout", "generation"])))),
    h("label", {}, "health", field("verdict", h("select", {}, options(["healthy", "unhealthy", "unobserved", "none"])))),
    h("label", {}, "text in the row", field("q", h("input", {type: "search", placeholder: "prompt, answer, tool output…"}))),
    h("button", {type: "submit"}, "Filter"),
    h("button", {type: "button", onclick: () => go(["run", id])}, "Clear"));
  return form;
}

async function drawTasks(id, filterQuery, offset, box, moveTo) {
  const q = new URLSearchParams(filterQuery);
  q.delete("q");
  q.set("offset", offset); q.set("limit", PAGE);
  const t = await api(`runs/${id}/tasks?${q}`);
  const table = h("table", {},
    h("tr", {}, h("th", {}, "task"), h("th", {class: "num"}, "rollouts"), h("th", {class: "num"}, "mean reward"),
      h("th", {class: "num"}, "pass rate"), h("th", {class: "num"}, "errors")),
    t.tasks.map((row) => h("tr", {class: "click", onclick: () => { const p = new URLSearchParams(filterQuery); p.set("task", row.task); go(["run", id], p); }},
      h("td", {}, String(row.task)), h("td", {class: "num"}, num(row.rollouts)), h("td", {class: "num"}, num(row.mean_reward)),
      h("td", {class: "num"}, pct(row.pass_rate)), h("td", {class: "num"}, num(row.errors)))));
  put(box, table, pager(offset, PAGE, t.total, t.tasks.length, "tasks", moveTo));
}

async function drawRows(id, filterQuery, offset, box, moveTo) {
  const q = new URLSearchParams(filterQuery);
  q.set("offset", offset); q.set("limit", PAGE);
  const page = await api(`runs/${id}/rows?${q}`);
  if (page.scanned === null) {
    put(box, rowTable(id, page.rows), pager(offset, PAGE, page.total, page.rows.length, "rollouts", moveTo));
    return;
  }
  // a text search: the server reads a bounded stretch per request; go on until a page is full
  const mine = generation;
  let rows = page.rows, next = page.next, scanned = page.scanned;
  const show = () => put(box, rowTable(id, rows), h("div", {class: "pager"}, h("span", {class: "muted", id: "search-info"},
    `${rows.length} match(es) in rows ${num(offset + 1)}–${num(scanned)} of ${num(page.total)}` + (next === null ? " (searched to the end)" : "")),
    offset > 0 ? h("button", {type: "button", onclick: () => moveTo(0)}, "from the start") : null,
    next !== null && rows.length >= PAGE ? h("button", {type: "button", id: "search-more", onclick: () => moveTo(next)}, "next matches ›") : null));
  show();
  while (rows.length < PAGE && next !== null && mine === generation && box.isConnected) {
    q.set("offset", next); q.set("limit", PAGE - rows.length);
    const more = await api(`runs/${id}/rows?${q}`);
    rows = rows.concat(more.rows); next = more.next; scanned = more.scanned;
    show();
  }
}

function rowTable(id, rows) {
  return h("table", {id: "rollout-table"},
    h("tr", {}, h("th", {class: "num"}, "line"), h("th", {}, "agent"), h("th", {class: "num"}, "task"), h("th", {class: "num"}, "rollout"),
      h("th", {class: "num"}, "reward"), h("th", {}, "failure"), h("th", {}, "health"), h("th", {}, "prompt")),
    rows.map((r) => h("tr", {class: "click", "data-line": r.line, onclick: () => go(["run", id, "rollout", r.line])},
      h("td", {class: "num"}, h("a", {href: `#/run/${id}/rollout/${r.line}`}, String(r.line))), h("td", {}, r.agent),
      h("td", {class: "num"}, String(r.task)), h("td", {class: "num"}, String(r.rollout)), h("td", {class: "num"}, num(r.reward)),
      h("td", {}, r.error ? badge(r.error, "err") : ""), h("td", {}, r.verdict ? badge(r.verdict) : ""),
      h("td", {class: "small"}, r.preview))));
}

function pager(offset, size, total, shown, what, moveTo) {
  return h("div", {class: "pager"},
    h("button", {type: "button", disabled: offset === 0 || null, onclick: () => moveTo(Math.max(0, offset - size))}, "‹ previous"),
    h("span", {class: "muted"}, total ? `${num(offset + 1)}–${num(offset + shown)} of ${num(total)} ${what}` : `no ${what}`),
    h("button", {type: "button", class: "next", disabled: offset + size >= total || null, onclick: () => moveTo(offset + size)}, "next ›"));
}

// ---- one rollout -----------------------------------------------------------------------
const BIG = new Set(["responses_create_params", "response", "ng_trajectory", "ng_model_call_capture"]);

async function rolloutPage(main, id, line) {
  const r = await api(`runs/${id}/rollouts/${line}`);
  where(`line ${line}`);
  const row = r.row;
  const nav = h("div", {class: "nav"}, h("a", {href: `#/run/${id}`}, "← the run"),
    r.previous !== null ? h("a", {href: `#/run/${id}/rollout/${r.previous}`, id: "prev"}, "‹ previous rollout") : null,
    r.next !== null ? h("a", {href: `#/run/${id}/rollout/${r.next}`, id: "next"}, "next rollout ›") : null);
  const head = h("h1", {}, `${r.agent || "(no agent)"} · task ${r.task} · rollout ${r.rollout}`);
  if (!row) {
    const why = r.cut ? `This row is ${num(r.bytes)} bytes: its first bytes as text.` : "This row nests too deep to lay out: its text.";
    put(main, nav, head, h("p", {}, why), folded(r.raw, "json"));
    return;
  }
  const reward = typeof row.reward === "number" ? row.reward : null;
  const summary = h("div", {class: "cards"}, h("div", {class: "card"}, h("div", {class: "kv"},
    h("span", {}, "reward"), h("span", {id: "reward"}, num(row.reward)),
    h("span", {}, "passed"), h("span", {}, reward === null ? "–" : reward >= 1 ? badge("pass") : badge("fail")),
    h("span", {}, "health"), h("span", {}, r.health ? badge(r.health.verdict) : "–",
      r.verdict_on_record ? h("span", {class: "muted small"}, ` (on record: ${r.verdict_on_record})`) : null),
    h("span", {}, "line"), h("span", {}, `${line} (${num(r.bytes)} bytes)`))));
  put(main, nav, head, h("div", {class: "split"}, summary, section("Health findings", healthBlock(r.health), "health")),
    section("Conversation", conversation(row), "conversation"),
    section("Tool calls", toolCalls(row), "tool-calls"),
    section("Model calls", modelCalls(row), "model-calls"),
    section("Verify fields", verifyFields(row), "fields"),
    section("The whole row", fold("as JSON", jsonBlock(row)), "raw"));
}

function section(title, body, id) { return h("div", {class: "section", id}, h("h2", {}, title), body); }

function verifyFields(row) {
  const rows = Object.entries(row).filter(([k]) => !BIG.has(k));
  return h("table", {}, rows.map(([k, v]) => h("tr", {}, h("th", {}, k),
    h("td", {}, v !== null && typeof v === "object" ? jsonBlock(v) : folded(String(v))))));
}

function healthBlock(health) {
  if (!health) return h("p", {class: "muted"}, "Not checked (the row is too long to read whole).");
  return h("div", {},
    h("p", {}, badge(health.verdict), " ", h("span", {class: "muted small"},
      "this rollout's own checks, run now (the duplicate and per-task checks need the whole run: gym-metrics health)")),
    health.findings.length ? h("ul", {}, health.findings.map((f) => h("li", {}, h("b", {}, f.check), " ", jsonBlock(f)))) : h("p", {}, "No findings."),
    health.unobserved.length ? h("p", {class: "small muted"}, "Unobserved (no evidence in the row): " + health.unobserved.join(", ")) : null);
}

function text(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (p && typeof p === "object" ? p.text ?? p.refusal ?? JSON.stringify(p) : String(p))).join("\n");
  return JSON.stringify(content, null, 2);
}

function message(role, body, cls) { return h("div", {class: "msg " + (cls || role)}, h("div", {class: "role"}, role), body); }

function items(list) {
  const outputs = new Map();
  for (const it of list) if (it && it.type === "function_call_output") outputs.set(it.call_id, it);
  return list.map((it) => {
    if (typeof it === "string") return message("user", folded(it));
    if (!it || typeof it !== "object") return message("item", jsonBlock(it));
    if (it.type === "function_call_output") return null;  // beside its call
    if (it.type === "function_call") {
      const out = outputs.get(it.call_id);
      return h("div", {class: "call"}, h("div", {}, h("div", {class: "role"}, "tool call ", h("code", {}, it.name)), folded(pretty(it.arguments))),
        h("div", {}, h("div", {class: "role"}, "output"), out ? folded(pretty(out.output)) : h("span", {class: "muted"}, "no output")));
    }
    if (it.type === "reasoning") return fold("reasoning", folded(text(it.summary || it.content)));
    if (it.role) return message(it.role, folded(text(it.content)) , it.role);
    return message(it.type || "item", jsonBlock(it));
  });
}

function pretty(s) {
  if (typeof s !== "string") return JSON.stringify(s, null, 2);
  try { return JSON.stringify(JSON.parse(s), null, 2); } catch (e) { return s; }
}

function conversation(row) {
  const params = row.responses_create_params || {};
  const prompt = params.input ?? params.messages ?? [];
  const response = row.response;
  const parts = [h("h3", {}, "Prompt"), items(Array.isArray(prompt) ? prompt : [prompt])];
  if (Array.isArray(params.tools) && params.tools.length)
    parts.push(fold(`tools offered (${params.tools.length})`, jsonBlock(params.tools)));
  parts.push(h("h3", {}, "Response"));
  if (response && Array.isArray(response.output)) parts.push(items(response.output));
  else if (response && Array.isArray(response.choices)) parts.push(items(response.choices.map((c) => c.message || c)));
  else if (response !== undefined) parts.push(jsonBlock(response));
  else parts.push(h("p", {class: "muted"}, "No response in the row."));
  return h("div", {}, parts);
}

function toolCalls(row) {
  const calls = (row.ng_trajectory && row.ng_trajectory.tool_calls) || [];
  if (!calls.length) return h("p", {class: "muted"}, "No tool-call record (collect --trajectory writes one); the calls are in the conversation above.");
  return h("table", {},
    h("tr", {}, h("th", {}, "tool"), h("th", {}, "call id"), h("th", {}, "status"), h("th", {class: "num"}, "ms"), h("th", {}, "output")),
    calls.map((c) => h("tr", {}, h("td", {}, h("code", {}, c.tool_name)), h("td", {class: "small"}, c.tool_call_id),
      h("td", {}, c.error_type ? badge(c.status + " " + c.error_type, "err") : c.status), h("td", {class: "num"}, num(c.duration_ms, 1)),
      h("td", {}, folded(pretty(c.output))))));
}

function modelCalls(row) {
  const captured = (row.ng_model_call_capture && row.ng_model_call_capture.calls) || [];
  const bodies = new Map(((row.ng_trajectory && row.ng_trajectory.model_calls) || []).map((c) => [c.model_call_id, c]));
  if (!captured.length && !bodies.size) return h("p", {class: "muted"}, "No model-call record (collect --capture-model-calls or --trajectory writes one).");
  const list = captured.length ? captured : [...bodies.values()];
  return h("div", {}, list.map((c, i) => {
    const body = bodies.get(c.model_call_id) || c;
    const tokens = c.tokens_in !== undefined ? `${num(c.tokens_in)} in · ${num(c.tokens_out)} out` : "";
    const ms = c.latency_total_ms ?? c.duration_ms;
    const failed = (c.status_code && c.status_code >= 400) || c.error_category;
    return fold(h("span", {}, `call ${i + 1}: `, failed ? badge(`${c.status_code || ""} ${c.error_category || ""}`, "err") : (c.status_code || c.response_status || ""),
      ` · ${tokens} · ${num(ms, 1)} ms`), h("div", {},
      h("div", {class: "grid2"}, h("div", {}, h("div", {class: "role"}, "request"), jsonBlock(body.request ?? null)),
        h("div", {}, h("div", {class: "role"}, "response"), jsonBlock(body.response ?? null))),
      fold("the call's record", jsonBlock(c))));
  }));
}

// ---- an evaluation's (or a job's) scored rows ---------------------------------------------
async function resultsPage(main, id, run, params) {
  if (run.error) { put(main, h("h1", {}, run.name), errorBox(new Error(run.error))); return; }
  const agg = h("table", {id: "aggregate-scores"},
    h("tr", {}, ["score", "count", "nan_count", "mean", "std_dev", "min", "max"].map((k) => h("th", {class: k === "score" ? null : "num"}, k))),
    run.aggregate_scores.map((a) => h("tr", {}, h("td", {}, a.name), ["count", "nan_count", "mean", "std_dev", "min", "max"].map((k) => h("td", {class: "num"}, num(a[k]))))));
  const field = (name, el) => { el.name = name; el.value = params.get(name) || ""; return el; };
  const form = h("form", {class: "filters", id: "filters", onsubmit: (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v !== "") p.set(k, v);
    go(["run", id], p);
  }},
    h("label", {}, "score", field("score", h("select", {}, h("option", {value: ""}, "any"), run.scores.map((n) => h("option", {value: n}, n))))),
    h("label", {}, "at least", field("min", h("input", {type: "number", step: "any"}))),
    h("label", {}, "at most", field("max", h("input", {type: "number", step: "any"}))),
    h("label", {}, "failed", field("failed", h("select", {}, h("option", {value: ""}, "any"), h("option", {value: "1"}, "yes"), h("option", {value: "0"}, "no")))),
    h("button", {type: "submit"}, "Filter"), h("button", {type: "button", onclick: () => go(["run", id])}, "Clear"));
  const box = h("div", {id: "scored-rows"});
  put(main, h("h1", {}, run.name), h("div", {class: "muted small"}, `${num(run.rows)} rows · ${num(run.failed)} failed · input: ${run.input_file || "not found beside the result"}`),
    h("h2", {}, "Aggregate scores"), agg, form, h("h2", {}, "Rows"), box);
  const q = new URLSearchParams();
  for (const k of ["score", "min", "max", "failed"]) if (params.get(k)) q.set(k, params.get(k));
  const draw = async (offset) => {
    q.set("offset", offset); q.set("limit", PAGE);
    const page = await api(`runs/${id}/scores?${q}`);
    put(box, h("table", {id: "scores-table"},
      h("tr", {}, h("th", {class: "num"}, "row"), run.scores.map((n) => h("th", {class: "num"}, n)), h("th", {}, "error"), h("th", {}, "input")),
      page.rows.map((r) => h("tr", {class: "click", "data-row": r.index, onclick: () => go(["run", id, "score", r.index])},
        h("td", {class: "num"}, h("a", {href: `#/run/${id}/score/${r.index}`}, String(r.index))),
        run.scores.map((n) => h("td", {class: "num"}, num(r.scores[n]))),
        h("td", {}, r.error ? badge(`${r.error.field}: ${r.error.reason}`, "err") : ""), h("td", {class: "small"}, r.preview)))),
      pager(offset, PAGE, page.total, page.rows.length, "rows", draw));
  };
  await draw(0);
}

async function scoredRowPage(main, id, index) {
  const r = await api(`runs/${id}/scores/${index}`);
  where(`row ${index}`);
  put(main, h("div", {class: "nav"}, h("a", {href: `#/run/${id}`}, "← the result"),
      r.previous !== null ? h("a", {href: `#/run/${id}/score/${r.previous}`}, "‹ previous row") : null,
      r.next !== null ? h("a", {href: `#/run/${id}/score/${r.next}`}, "next row ›") : null),
    h("h1", {}, `row ${index}`),
    section("Scores", jsonBlock(r.entry), "scores"),
    r.input && r.input.responses_create_params ? section("Conversation", conversation(r.input), "conversation") : null,
    section(`The input row${r.input_file ? " (" + r.input_file + ")" : ""}`, r.input === null ? h("p", {class: "muted"}, "The input file is not beside the result.") : jsonBlock(r.input), "raw"));
}

// ---- two runs side by side ---------------------------------------------------------------
async function comparePage(main, a, b, params) {
  const q = new URLSearchParams({a, b});
  for (const k of ["agent_a", "agent_b"]) if (params.get(k)) q.set(k, params.get(k));
  const [c, runs] = await Promise.all([api(`compare?${q}`), api("runs")]);
  const name = (id) => (runs.runs[id] || {}).name || id;
  where(`${name(a)} vs ${name(b)}`);
  const p = c.paired || {};
  const paired = p.error ? h("p", {class: "muted"}, "No paired difference: " + p.error) : h("div", {class: "kv", id: "paired"},
    h("span", {}, "mean reward A"), h("span", {}, num(p.value_a)), h("span", {}, "mean reward B"), h("span", {}, num(p.value_b)),
    h("span", {}, "A − B"), h("span", {}, `${num(p.difference)} [${num(p.ci_low)}, ${num(p.ci_high)}] at ${pct(p.confidence)}`),
    h("span", {}, "p-value"), h("span", {}, num(p.p_value, 4)), h("span", {}, "common tasks"), h("span", {}, num(p.common_tasks)));
  const table = h("table", {id: "compare-table"},
    h("tr", {}, h("th", {}, "task"), h("th", {class: "num"}, "pass rate A"), h("th", {class: "num"}, "pass rate B"), h("th", {}, "flip"),
      h("th", {class: "num"}, "rollouts A / B")),
    c.tasks.map((t) => h("tr", {},
      h("td", {}, h("a", {href: `#/run/${a}?task=${t.task}`}, `${t.task} (A)`), " ", h("a", {href: `#/run/${b}?task=${t.task}`}, "(B)")),
      h("td", {class: "num"}, pct(t.pass_rate_a)), h("td", {class: "num"}, pct(t.pass_rate_b)),
      h("td", {}, t.flip ? badge(t.flip, t.flip.startsWith("pass") ? "fail" : "pass") : ""),
      h("td", {class: "num"}, `${t.rollouts_a} / ${t.rollouts_b}`))));
  put(main, h("h1", {}, `A: ${name(a)} (${c.agent_a || "no agent"}) · B: ${name(b)} (${c.agent_b || "no agent"})`),
    h("div", {class: "section"}, h("div", {class: "kv"},
      h("span", {}, "tasks in both"), h("span", {}, num(c.common_tasks)), h("span", {}, "only in A / only in B"), h("span", {}, `${c.only_a} / ${c.only_b}`),
      h("span", {}, "pass → fail"), h("span", {id: "pass-to-fail"}, num(c.pass_to_fail)), h("span", {}, "fail → pass"), h("span", {id: "fail-to-pass"}, num(c.fail_to_pass))),
      h("h2", {}, "Paired difference (gym-metrics compare)"), paired),
    h("p", {class: "muted small"}, `A task passes when more than half its rollouts do. Flips first; ${c.tasks_shown} of ${c.common_tasks} tasks listed.`), table);
  status("");
}

window.addEventListener("hashchange", route);
route();
