// A gym-metrics client in Node.js, built from protos/ alone (no generated code, no Python).
//
//   node client.mjs HOST:PORT [--body FILE|-] [--rows FILE] [--big-tasks N] [--deadline-s SECONDS]
//
// --body: JSONL of math_exact verify request bodies (e.g. lines of
//   gym_metrics_servers/math_exact/sample.jsonl); "-" or no flag reads stdin. Verify sends the first line;
//   VerifyStream sends 2 batches whose items cycle through the lines, plus one invalid body.
// --rows: JSON {"agent": NAME, "kinds": {FIELD: "VALUE_KIND_..."}, "batches": [[ROW, ...], ...]},
//   each ROW {"task_index": N, "rollout_index": N, FIELD: VALUE, ...} (an absent or null FIELD
//   is sent as `missing`). AggregateMetrics sends one RolloutBatch per entry of "batches".
//   Without the flag a built-in set of 2 batches is used. The answer (a stream of parts) is
//   reassembled: later parts' group_level_metrics columns are appended to the first's.
// --big-tasks N: also aggregate N one-rollout tasks (reward ((7 t) mod 10) / 10, missing for
//   t mod 1000 = 999), enough (math_exact: ~50k) for an answer in several parts, and check the
//   parts reassemble into every task and value, in order.
//
// Prints one JSON object on stdout (non-finite doubles written as the strings "NaN",
// "Infinity", "-Infinity"; int64 values as the strings grpc delivers them). Exits 1 with a
// message naming the failed step on any error or broken expectation.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DEFAULT_PROTO = path.resolve(HERE, '../../../protos/gym_metrics/v1/resources.proto');
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
const BIG_INDEX = '9007199254740993'; // 2^53 + 1: not representable as a JS number

class CheckError extends Error {}

function check(condition, message) {
  if (!condition) throw new CheckError(message);
}

// ------------------------------------------------------------------------------ arguments

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    body: { type: 'string', default: '-' },
    rows: { type: 'string' },
    proto: { type: 'string', default: DEFAULT_PROTO },
    'big-tasks': { type: 'string', default: '0' },
    'deadline-s': { type: 'string', default: '20' },
  },
});
if (positionals.length !== 1) {
  console.error('usage: node client.mjs HOST:PORT [--body FILE|-] [--rows FILE] [--big-tasks N] [--deadline-s SECONDS]');
  process.exit(2);
}
const ADDRESS = positionals[0];
const DEADLINE_S = Number(opts['deadline-s']);
const BIG_TASKS = Number(opts['big-tasks']);
if (!(DEADLINE_S > 0) || !(Number.isInteger(BIG_TASKS) && BIG_TASKS >= 0)) {
  console.error('--deadline-s must be a positive number and --big-tasks a non-negative integer');
  process.exit(2);
}

function deadline() {
  return new Date(Date.now() + DEADLINE_S * 1000);
}

function readBodies(source) {
  const text = fs.readFileSync(source === '-' ? 0 : source, 'utf8');
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l.length > 0);
  check(lines.length > 0, `no verify body in ${source === '-' ? 'stdin' : source}`);
  lines.forEach((line, i) => {
    try {
      JSON.parse(line);
    } catch (err) {
      throw new CheckError(`body line ${i + 1} is not JSON: ${err.message}`);
    }
  });
  return lines;
}

const DEFAULT_ROWS = {
  agent: 'node_default_agent',
  kinds: { reward: 'VALUE_KIND_FLOAT', output_tokens: 'VALUE_KIND_INT', is_correct: 'VALUE_KIND_BOOL' },
  batches: [
    [
      { task_index: 0, rollout_index: 0, reward: 1.0, output_tokens: 120, is_correct: true },
      { task_index: 0, rollout_index: 1, reward: 0.0, output_tokens: 80, is_correct: false },
      { task_index: 1, rollout_index: 0, reward: 0.5, is_correct: false },
    ],
    [
      { task_index: 1, rollout_index: 1, reward: 1.0, output_tokens: 64, is_correct: true },
      { task_index: 2, rollout_index: 0, output_tokens: 10, is_correct: false },
      { task_index: 2, rollout_index: 1, reward: 0.25, output_tokens: 33, is_correct: false },
    ],
  ],
};

// ------------------------------------------------------------------------------ helpers

function unary(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: deadline() }, (err, response) => (err ? reject(err) : resolve(response)));
  });
}

/** JSON.stringify that keeps non-finite doubles (as strings) instead of turning them into null. */
function toJson(value) {
  return JSON.stringify(value, (key, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v), 2);
}

/** Rows -> packed RolloutBatch: indices as int64 strings, one NumericColumn per field. */
function packBatch(batchId, rows, kinds) {
  const names = new Set(Object.keys(kinds));
  for (const row of rows) {
    for (const [key, value] of Object.entries(row)) {
      if (key !== 'task_index' && key !== 'rollout_index' && (typeof value === 'number' || typeof value === 'boolean')) {
        names.add(key);
      }
    }
  }
  const columns = {};
  for (const name of names) {
    const values = [];
    const missing = [];
    let kind = kinds[name];
    rows.forEach((row, i) => {
      const value = row[name];
      if (value === undefined || value === null) {
        values.push(0); // ignored by the server: position i is listed in `missing`
        missing.push(i);
      } else {
        if (kind === undefined) kind = typeof value === 'boolean' ? 'VALUE_KIND_BOOL' : 'VALUE_KIND_FLOAT';
        values.push(typeof value === 'boolean' ? (value ? 1 : 0) : Number(value));
      }
    });
    columns[name] = { values, missing, kind: kind ?? 'VALUE_KIND_FLOAT' };
  }
  return {
    batch_id: batchId,
    task_index: rows.map((r) => String(r.task_index)),
    rollout_index: rows.map((r) => String(r.rollout_index)),
    columns,
  };
}

// ------------------------------------------------------------------------------ the checks

async function checkVerify(client, bodies) {
  const response = await unary(client, 'Verify', { body_json: bodies[0] });
  check(typeof response.reward === 'number', `Verify: reward is ${typeof response.reward}, expected a number`);
  const full = JSON.parse(response.response_json);
  check(full.reward === response.reward, `Verify: response_json.reward ${full.reward} != reward ${response.reward}`);
  return { reward: response.reward, response: full };
}

function verifyStreamCall(client, requests) {
  return new Promise((resolve, reject) => {
    const call = client.VerifyStream({ deadline: deadline() });
    const responses = [];
    call.on('data', (message) => responses.push(message));
    call.on('error', reject);
    call.on('end', () => resolve(responses));
    for (const request of requests) call.write(request);
    call.end();
  });
}

async function checkVerifyStream(client, bodies) {
  // Batch 0: 4 items; batch 1: 3 items, one with an int64 index beyond 2^53, one invalid body.
  const plan = [
    { batch_id: 'node-batch-0', count: 4 },
    { batch_id: 'node-batch-1', count: 3 },
  ];
  const requests = [];
  const sent = []; // per batch, per item: what to expect back
  let k = 0;
  for (const [b, { batch_id, count }] of plan.entries()) {
    const items = [];
    const expect = [];
    for (let i = 0; i < count; i++, k++) {
      const line = k % bodies.length;
      const item = { task_index: String(100 + k), rollout_index: String(b), body_json: bodies[line] };
      items.push(item);
      expect.push({ task_index: item.task_index, rollout_index: item.rollout_index, body_line: line, valid: true });
    }
    if (b === 1) {
      items.push({ task_index: BIG_INDEX, rollout_index: '7', body_json: bodies[0] });
      expect.push({ task_index: BIG_INDEX, rollout_index: '7', body_line: 0, valid: true });
      items.push({ task_index: '5', rollout_index: '0', body_json: '{}' }); // no expected_answer
      expect.push({ task_index: '5', rollout_index: '0', body_line: null, valid: false });
    }
    requests.push({ batch_id, items });
    sent.push(expect);
  }

  const responses = await verifyStreamCall(client, requests);
  check(responses.length === requests.length, `VerifyStream: ${responses.length} responses for ${requests.length} batches`);
  const out = [];
  responses.forEach((response, b) => {
    const where = `VerifyStream batch ${b}`;
    check(response.batch_id === requests[b].batch_id, `${where}: batch_id ${JSON.stringify(response.batch_id)} != ${requests[b].batch_id}`);
    check(response.results.length === sent[b].length, `${where}: ${response.results.length} results for ${sent[b].length} items`);
    const results = response.results.map((result, i) => {
      const want = sent[b][i];
      const at = `${where} result ${i}`;
      check(typeof result.task_index === 'string', `${at}: task_index is ${typeof result.task_index}, expected an int64 string`);
      check(typeof result.rollout_index === 'string', `${at}: rollout_index is ${typeof result.rollout_index}, expected an int64 string`);
      check(result.task_index === want.task_index, `${at}: task_index ${result.task_index} != ${want.task_index}`);
      check(result.rollout_index === want.rollout_index, `${at}: rollout_index ${result.rollout_index} != ${want.rollout_index}`);
      if (want.valid) {
        check(result.error_kind === 'VERIFY_ERROR_KIND_UNSPECIFIED', `${at}: error_kind ${result.error_kind}: ${result.error_message}`);
        check(JSON.parse(result.response_json).reward === result.reward, `${at}: response_json.reward != reward`);
      } else {
        check(result.error_kind === 'VERIFY_ERROR_KIND_INVALID_REQUEST', `${at}: error_kind ${result.error_kind}, expected VERIFY_ERROR_KIND_INVALID_REQUEST`);
        check(result.error_message.includes('expected_answer'), `${at}: error_message does not name expected_answer: ${result.error_message}`);
        check(result.response_json === '' && result.reward === 0, `${at}: a failed result must carry reward 0 and no response_json`);
      }
      return {
        task_index: result.task_index,
        rollout_index: result.rollout_index,
        body_line: want.body_line,
        reward: result.reward,
        error_kind: result.error_kind,
        error_message: result.error_message,
      };
    });
    out.push({ batch_id: response.batch_id, results });
  });
  return { batches: out };
}

/** AggregateMetrics: send every message, then collect the answer's parts (one when the
 * proto declares a single response). */
function aggregateCall(client, messages, streamed) {
  return new Promise((resolve, reject) => {
    if (!streamed) {
      const call = client.AggregateMetrics({ deadline: deadline() }, (err, response) => (err ? reject(err) : resolve([response])));
      for (const message of messages) call.write(message);
      call.end();
      return;
    }
    const call = client.AggregateMetrics({ deadline: deadline() });
    const parts = [];
    call.on('data', (part) => parts.push(part));
    call.on('error', reject);
    call.on('end', () => resolve(parts));
    for (const message of messages) call.write(message);
    call.end();
  });
}

/** Concatenate one repeated field over the parts; a part without it contributes `pad` per task. */
function concatField(groups, name, pad) {
  if (groups.every((g) => g[name].length === 0)) return [];
  return groups.flatMap((g) => (g[name].length ? g[name] : Array(g.task_index.length).fill(pad)));
}

/** Reassemble the parts of one AggregateMetrics answer into one Metrics (SPEC: the first part
 * holds every field, later parts only the next tasks' group_level_metrics). */
function mergeParts(parts, streamed) {
  check(parts.length > 0, 'AggregateMetrics: the answer holds no part');
  if (streamed) {
    check(parts[parts.length - 1].last === true, `AggregateMetrics: the answer ended before its last part (${parts.length} received)`);
    check(parts.slice(0, -1).every((p) => !p.last), 'AggregateMetrics: a part before the end is marked last');
    parts.slice(1).forEach((p, i) => {
      check(p.metrics.agent_metrics_json === '' && p.received_rollouts === '0',
        `AggregateMetrics: part ${i + 1} repeats the agent-level fields`);
    });
  }
  const m = parts[0].metrics;
  const groups = parts.map((p) => p.metrics.group_level_metrics);
  const g = {
    task_index: concatField(groups, 'task_index', null),
    num_rollouts: concatField(groups, 'num_rollouts', null),
    expected_num_rollouts: concatField(groups, 'expected_num_rollouts', null),
    missing_num_rollouts: concatField(groups, 'missing_num_rollouts', null),
    reward_profile_completion_pct: concatField(groups, 'reward_profile_completion_pct', null),
    sample_json: concatField(groups, 'sample_json', ''),
    custom_json: concatField(groups, 'custom_json', ''),
    stats: {},
    rollout_infos: null,
  };
  const statKeys = [...new Set(groups.flatMap((x) => Object.keys(x.stats)))];
  for (const key of statKeys) {
    g.stats[key] = groups.flatMap((x) => (x.stats[key] ? x.stats[key].values : Array(x.task_index.length).fill(NaN)));
  }
  if (groups.every((x) => x.rollout_infos)) {
    const infos = groups.map((x) => x.rollout_infos);
    const names = [...new Set(infos.flatMap((i) => Object.keys(i.values)))];
    const values = {};
    for (const name of names) {
      const col = { values: [], missing: [], kind: null };
      for (const info of infos) {
        const offset = col.values.length;
        const part = info.values[name];
        if (part) {
          col.values.push(...part.values);
          col.missing.push(...part.missing.map((i) => i + offset));
          col.kind ??= part.kind;
        } else {
          info.task_index.forEach((_, i) => {
            col.values.push(0);
            col.missing.push(offset + i);
          });
        }
      }
      values[name] = col;
    }
    g.rollout_infos = {
      task_index: infos.flatMap((i) => i.task_index),
      rollout_index: infos.flatMap((i) => i.rollout_index),
      values,
    };
  }
  const n = g.task_index.length;
  for (const [name, col] of Object.entries(g)) {
    if (Array.isArray(col) && col.length) check(col.length === n, `AggregateMetrics: group ${name} has ${col.length} values for ${n} tasks`);
  }
  for (const [key, col] of Object.entries(g.stats)) check(col.length === n, `AggregateMetrics: group stats ${key} has ${col.length} values for ${n} tasks`);
  return { metrics: m, groups: g, received_rollouts: parts[0].received_rollouts, duplicate_batches: parts[0].duplicate_batches };
}

function headerMessage(agent) {
  return { header: { agent_ref: { name: agent }, options: { omit_rollout_infos: false }, expected_rollouts_per_task: 0 } };
}

async function checkAggregate(client, spec, streamed) {
  const agent = spec.agent;
  const kinds = spec.kinds ?? {};
  check(typeof agent === 'string' && agent.length > 0, 'rows: "agent" must be a non-empty string');
  check(Array.isArray(spec.batches) && spec.batches.length >= 2, 'rows: "batches" must hold at least 2 batches');
  const batches = spec.batches.map((rows, b) => packBatch(`node-agg-${b}`, rows, kinds));
  check(batches.some((batch) => Object.values(batch.columns).some((col) => col.missing.length > 0)),
    'rows: no column has a missing entry (the check needs one)');
  const parts = await aggregateCall(client, [headerMessage(agent), ...batches.map((batch) => ({ batch }))], streamed);
  const { metrics: m, groups: g, received_rollouts, duplicate_batches } = mergeParts(parts, streamed);
  const total = spec.batches.reduce((n, rows) => n + rows.length, 0);
  check(received_rollouts === String(total), `AggregateMetrics: received_rollouts ${JSON.stringify(received_rollouts)} != "${total}"`);
  check(duplicate_batches === '0', `AggregateMetrics: duplicate_batches ${duplicate_batches} != "0"`);
  check(m.agent_ref.name === agent, `AggregateMetrics: agent_ref.name ${m.agent_ref.name} != ${agent}`);
  check(typeof m.agent_metrics['mean/reward'] === 'number', 'AggregateMetrics: agent_metrics lacks mean/reward');
  check(g.task_index.every((t) => typeof t === 'string'), 'AggregateMetrics: group task_index values must be int64 strings');
  // The JSON twins of the typed maps must agree with them.
  const agentJson = JSON.parse(m.agent_metrics_json);
  check(agentJson['mean/reward'] === m.agent_metrics['mean/reward'], 'AggregateMetrics: agent_metrics_json disagrees with agent_metrics');
  const keyJson = JSON.parse(m.key_metrics_json);
  for (const [k, v] of Object.entries(m.key_metrics)) {
    check(keyJson[k] === v || (Number.isNaN(v) && keyJson[k] === null), `AggregateMetrics: key_metrics_json[${k}] disagrees with key_metrics`);
  }
  return {
    parts: parts.length,
    received_rollouts,
    duplicate_batches,
    sent_batches: batches,
    agent_name: m.agent_ref.name,
    agent_metrics: m.agent_metrics,
    key_metrics: m.key_metrics,
    key_metrics_order: Object.keys(keyJson),
    non_finite_counts: m.non_finite_counts,
    group_level_metrics: {
      task_index: g.task_index,
      num_rollouts: g.num_rollouts,
      expected_num_rollouts: g.expected_num_rollouts,
      missing_num_rollouts: g.missing_num_rollouts,
      reward_profile_completion_pct: g.reward_profile_completion_pct,
      stats: g.stats,
      custom: g.custom_json.map((s) => (s === '' ? null : JSON.parse(s))),
      rollout_infos: g.rollout_infos,
    },
    repeat_level_metrics: m.repeat_level_metrics,
  };
}

/** Many tasks (1 rollout each, reward ((7 t) mod 10) / 10, missing for t mod 1000 = 999):
 * large enough an answer comes in several parts; checks they reassemble into every task and
 * value, in order (so `missing` positions must be shifted when parts are joined). */
const bigReward = (t) => ((7 * t) % 10) / 10;
const bigMissing = (t) => t % 1000 === 999;

async function checkBigAggregate(client, numTasks, streamed) {
  const batchRows = 5000;
  const batches = [];
  for (let lo = 0; lo < numTasks; lo += batchRows) {
    const hi = Math.min(lo + batchRows, numTasks);
    const tasks = Array.from({ length: hi - lo }, (_, i) => lo + i);
    batches.push({
      batch_id: `node-big-${lo}`,
      task_index: tasks.map(String),
      rollout_index: tasks.map(() => '0'),
      columns: {
        reward: {
          values: tasks.map((t) => (bigMissing(t) ? 0 : bigReward(t))),
          missing: tasks.flatMap((t, i) => (bigMissing(t) ? [i] : [])),
          kind: 'VALUE_KIND_FLOAT',
        },
      },
    });
  }
  const parts = await aggregateCall(client, [headerMessage('node_big_agent'), ...batches.map((batch) => ({ batch }))], streamed);
  const { metrics: m, groups: g, received_rollouts } = mergeParts(parts, streamed);
  check(received_rollouts === String(numTasks), `big AggregateMetrics: received_rollouts ${received_rollouts} != ${numTasks}`);
  check(g.task_index.length === numTasks, `big AggregateMetrics: ${g.task_index.length} tasks reassembled, expected ${numTasks}`);
  g.task_index.forEach((t, i) => check(t === String(i), `big AggregateMetrics: task ${i} arrived as ${t} (parts out of order?)`));
  check(g.num_rollouts.every((n) => n === '1'), 'big AggregateMetrics: a task lost its rollout');
  check(g.rollout_infos && g.rollout_infos.task_index.length === numTasks, 'big AggregateMetrics: rollout_infos not reassembled');
  const means = g.stats['mean/reward'];
  means.forEach((v, t) => check(bigMissing(t) ? Number.isNaN(v) : v === bigReward(t), `big AggregateMetrics: task ${t} mean/reward ${v}`));
  const infoReward = g.rollout_infos.values.reward;
  const wantMissing = Array.from({ length: numTasks }, (_, t) => t).filter(bigMissing);
  const firstBad = wantMissing.findIndex((p, i) => infoReward.missing[i] !== p);
  check(infoReward.missing.length === wantMissing.length && firstBad === -1,
    `big AggregateMetrics: rollout_infos reward missing holds ${infoReward.missing.length} positions, expected ` +
    `${wantMissing.length}; entry ${firstBad} is ${infoReward.missing[firstBad]}, expected ${wantMissing[firstBad]}`);
  infoReward.values.forEach((v, i) => check(bigMissing(i) || v === bigReward(i), `big AggregateMetrics: rollout_infos reward ${i} is ${v}`));
  return { parts: parts.length, tasks: g.task_index.length, agent_metrics: m.agent_metrics, key_metrics: m.key_metrics };
}

async function checkServerInfo(client) {
  const info = await unary(client, 'GetServerInfo', {});
  check(info.name.length > 0, 'GetServerInfo: empty name');
  check(info.version.length > 0, 'GetServerInfo: empty version');
  const requestSchema = JSON.parse(info.verify_request_schema_json);
  const responseSchema = JSON.parse(info.verify_response_schema_json);
  return {
    name: info.name,
    version: info.version,
    metrics: info.metrics,
    wants_rows: info.wants_rows,
    verify_request_required: requestSchema.required ?? [],
    verify_response_properties: Object.keys(responseSchema.properties ?? {}),
  };
}

// ------------------------------------------------------------------------------ main

async function main() {
  let step = 'load the proto';
  let client;
  try {
    const definition = protoLoader.loadSync(opts.proto, {
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    const { ResourcesService } = grpc.loadPackageDefinition(definition).gym_metrics.v1;
    step = 'read the inputs';
    const bodies = readBodies(opts.body);
    const rowsSpec = opts.rows ? JSON.parse(fs.readFileSync(opts.rows, 'utf8')) : DEFAULT_ROWS;

    step = `connect to ${ADDRESS}`;
    client = new ResourcesService(ADDRESS, grpc.credentials.createInsecure(), {
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    });
    await new Promise((resolve, reject) => client.waitForReady(deadline(), (err) => (err ? reject(err) : resolve())));

    const out = {};
    step = 'Verify';
    out.verify = await checkVerify(client, bodies);
    step = 'VerifyStream';
    out.verify_stream = await checkVerifyStream(client, bodies);
    // The answer of AggregateMetrics is a stream of parts in the current contract; a single
    // message in an older one. Read it from the proto rather than assume.
    const streamed = Boolean(ResourcesService.service.AggregateMetrics.responseStream);
    step = 'AggregateMetrics';
    out.aggregate = await checkAggregate(client, rowsSpec, streamed);
    if (BIG_TASKS > 0) {
      step = `AggregateMetrics (${BIG_TASKS} tasks)`;
      out.big_aggregate = await checkBigAggregate(client, BIG_TASKS, streamed);
    }
    step = 'GetServerInfo';
    out.server_info = await checkServerInfo(client);
    process.stdout.write(toJson(out) + '\n');
  } catch (err) {
    const code = typeof err.code === 'number' ? ` [grpc ${grpc.status[err.code] ?? err.code}]` : '';
    const detail = err instanceof CheckError ? err.message : err.details || err.message || String(err);
    console.error(`polyglot node client FAILED at ${step}${code}: ${detail}`);
    process.exitCode = 1;
  } finally {
    client?.close();
  }
}

// A hung call is bounded by its deadline; this bounds everything else (e.g. a stuck read).
const watchdog = setTimeout(() => {
  console.error(`polyglot node client FAILED: did not finish within ${4 * DEADLINE_S + 10} s`);
  process.exit(1);
}, (4 * DEADLINE_S + 10) * 1000);
watchdog.unref();

await main();
