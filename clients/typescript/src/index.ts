// gym-metrics' TypeScript client: the generated contract (./gen, connect-es) and helpers that
// follow docs/grpc.md: read a rollouts file as `collect` indexes it, verify it over
// VerifyStream, aggregate each agent with its parts reassembled, run a durable job.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";

import { clone, create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type CallOptions, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { BadRequestSchema } from "./gen/google/rpc/error_details_pb.js";
import { JobService, JobState, type Job, type JobSpec } from "./gen/gym_metrics/v1/jobs_pb.js";
import {
  AggregateMetricsResponseSchema,
  DoubleColumnSchema,
  NumericColumnSchema,
  ResourcesService,
  RolloutInfosSchema,
  ShownColumnSchema,
  ValueKind,
  VerifyErrorKind,
  type AggregateMetricsRequest,
  type AggregateMetricsResponse,
  type AggregateOptions,
  type GroupLevelMetrics,
  type NumericColumn,
  type RolloutInfos,
  type ShownColumn,
  type VerifyStreamRequest,
} from "./gen/gym_metrics/v1/resources_pb.js";

export * from "./gen/gym_metrics/v1/jobs_pb.js";
export * from "./gen/gym_metrics/v1/resources_pb.js";

export type { CallOptions };

/** The largest gRPC message a gym-metrics server takes and sends (its --max-message-mb). */
export const MAX_MESSAGE_BYTES = 64 << 20;

/** What one batch carries: `maxBatchBytes` of row text at most (beyond one row), as the Python
 * client; a row past `maxRowBytes` (the message limit less room for the message's own
 * fields) is an error naming its line. */
export const limits = { maxBatchBytes: 16 << 20, maxRowBytes: MAX_MESSAGE_BYTES - (64 << 10) };

/** How to reach a server beyond its address. */
export interface ConnectOptions {
  /** Sent as `authorization: Bearer <token>` on every call (a server run with --auth-token-env requires it). */
  token?: string;
  /** A PEM root certificate (its text or bytes): connect with TLS, trusting it. */
  tlsCa?: string | Buffer;
}

/** A connection to a gym-metrics server (`serve`) or job server (`jobs serve`), HOST:PORT,
 * with the server's message limits. */
export function connect(address: string, options: ConnectOptions = {}): Transport {
  const interceptors: Interceptor[] = [];
  const token = options.token;
  if (token) {
    interceptors.push((next) => async (request) => {
      request.header.set("authorization", `Bearer ${token}`);
      return next(request);
    });
  }
  const tls = options.tlsCa !== undefined;
  return createGrpcTransport({
    baseUrl: `${tls ? "https" : "http"}://${address}`,
    interceptors,
    readMaxBytes: MAX_MESSAGE_BYTES,
    writeMaxBytes: MAX_MESSAGE_BYTES,
    // Node's HTTP/2 session refuses (ENHANCE_YOUR_CALM) past 10 MB of buffered data by default:
    // a 16 MiB batch, or a 64 MiB answer, needs more.
    nodeOptions: { maxSessionMemory: 4 * (MAX_MESSAGE_BYTES >> 20), ...(tls ? { ca: options.tlsCa } : {}) },
  });
}

/** The bearer token in the environment variable `name` (undefined when no name is given); a
 * named variable that is unset or empty is an error, never a silent unauthenticated call. The
 * token is never in an error. */
export function tokenFromEnv(name: string | undefined): string | undefined {
  if (!name) return undefined;
  const token = (process.env[name] ?? "").trim(); // a secret mounted from a file ends with its newline
  if (token === "") throw new Error(`auth token variable ${name} is not set or empty`);
  if (!/^[ -~]+$/.test(token)) throw new Error(`auth token variable ${name} holds characters a header cannot carry (only printable ASCII)`);
  return token;
}

/**
 * The options of each call a helper makes: `timeoutMs` bounds the whole helper (each call gets
 * what is left of it, and fails DeadlineExceeded past it); `signal` cancels it.
 */
function callOptions(options: CallOptions | undefined): () => CallOptions {
  const end = options?.timeoutMs ? Date.now() + options.timeoutMs : undefined;
  return () => ({ ...options, timeoutMs: end === undefined ? undefined : Math.max(1, end - Date.now()) });
}

/**
 * An error of a call as its cause: a stream the server or the network closed (an HTTP/2
 * CANCEL the caller did not ask for, as when the server dies mid-stream) is Unavailable, not
 * Canceled.
 */
function callError(err: unknown, options: CallOptions | undefined): unknown {
  if (!(err instanceof ConnectError) || err.code !== Code.Canceled || options?.signal?.aborted) return err;
  return new ConnectError(`the server closed the call (${err.rawMessage})`, Code.Unavailable, undefined, undefined, err);
}

export function resourcesClient(transport: Transport): Client<typeof ResourcesService> {
  return createClient(ResourcesService, transport);
}

export function jobsClient(transport: Transport): Client<typeof JobService> {
  return createClient(JobService, transport);
}

/** One line of a rollouts file: the verify request as the line holds it. */
export interface Rollout {
  agent: string;
  taskIndex: bigint;
  rolloutIndex: bigint;
  /** 1-based line number, for error messages. */
  line: number;
  /** The line's JSON object, as text (a CRLF ending dropped). */
  row: string;
  /** The line already holds a `reward`: a finished rollout, not verified again; its row is
   * aggregated as it is. */
  finished?: boolean;
}

/** The largest task or rollout index (64-bit, less one), as gym-metrics. */
export const MAX_INDEX = 2n ** 63n - 2n;

/**
 * A JSONL file of rollouts, indexed as `gym-metrics collect` (and NeMo Gym's collection) index
 * them, line by line (docs/pipelines.md):
 *
 * - A line to verify keeps its `_ng_task_index`; one without gets the index of the first
 *   identical line before it, or the next new index. Lines are compared as text with their
 *   ending: a CRLF ending counts as a newline, and a last line without a final newline differs
 *   from the same line earlier.
 * - Rollout indices count per task over every agent, in file order (a given
 *   `_ng_rollout_index` is replaced), passing over those of finished rollouts of the task.
 * - A line that already has a `reward` (not null) is a finished rollout, not verified again.
 *   With both indices (`_ng_task_index` or `task_index`, `_ng_rollout_index` or
 *   `rollout_index`) it keeps them; with fewer it is indexed like a line to verify (its task
 *   index read under either name). One finished key on two lines is an error naming both.
 *
 * An index must be an integer from 0 to MAX_INDEX (2.0 is 2). A line that is not a JSON object,
 * lacks `agent_ref.name` or has a wrong index is an error naming it (`path:line: field: why`).
 */
export function readRollouts(path: string): Rollout[] {
  const data = readFileSync(path, "utf8");
  type Parsed = { rollout: Rollout; identity: string; task?: bigint; fixed?: bigint };
  const lines: Parsed[] = [];
  for (let start = 0, number = 1; start < data.length; number++) {
    let end = data.indexOf("\n", start);
    const terminated = end >= 0;
    if (!terminated) end = data.length;
    let text = data.slice(start, end);
    start = end + 1;
    if (text.endsWith("\r")) text = text.slice(0, -1);
    if (text === "") continue;
    const at = `${path}:${number}`;
    let head: unknown;
    try {
      head = JSON.parse(text);
    } catch (err) {
      throw new Error(`${at}: not a JSON object: ${(err as Error).message}`);
    }
    if (typeof head !== "object" || head === null || Array.isArray(head)) throw new Error(`${at}: not a JSON object`);
    const agent = (head as { agent_ref?: { name?: unknown } }).agent_ref?.name;
    if (typeof agent !== "string" || agent === "") throw new Error(`${at}: agent_ref.name is missing`);
    const raw = new Map(members(text));
    const finished = (raw.get("reward") ?? "null") !== "null";
    const p: Parsed = { rollout: { agent, taskIndex: 0n, rolloutIndex: 0n, line: number, row: text, finished }, identity: terminated ? text + "\n" : text };
    try {
      p.task = indexOf(raw, finished ? ["_ng_task_index", "task_index"] : ["_ng_task_index"]);
      if (finished && p.task !== undefined) p.fixed = indexOf(raw, ["_ng_rollout_index", "rollout_index"]);
    } catch (err) {
      throw new Error(`${at}: ${(err as Error).message}`);
    }
    lines.push(p);
  }
  // Finished rollouts with both indices first: their keys are fixed, counted ones pass over them.
  const firstAt = new Map<string, number>();
  const taken = new Map<bigint, Set<bigint>>();
  for (const p of lines) {
    if (p.fixed === undefined) continue;
    const key = JSON.stringify([p.rollout.agent, String(p.task), String(p.fixed)]);
    const first = firstAt.get(key);
    if (first !== undefined) {
      throw new Error(`${path}:${p.rollout.line}: rollouts given twice: (${JSON.stringify(p.rollout.agent)}, ${p.task}, ${p.fixed}) ` +
        `again (first at line ${first}): two lines hold this rollout`);
    }
    firstAt.set(key, p.rollout.line);
    if (!taken.has(p.task!)) taken.set(p.task!, new Set());
    taken.get(p.task!)!.add(p.fixed);
  }
  const taskOf = new Map<string, bigint>();
  const nextOf = new Map<bigint, bigint>();
  return lines.map((p) => {
    const r = p.rollout;
    if (p.fixed !== undefined) return { ...r, taskIndex: p.task!, rolloutIndex: p.fixed };
    let task = p.task ?? taskOf.get(p.identity);
    if (task === undefined) {
      task = BigInt(taskOf.size);
      taskOf.set(p.identity, task);
    }
    let next = nextOf.get(task) ?? 0n;
    while (taken.get(task)?.has(next)) next++;
    nextOf.set(task, next + 1n);
    return { ...r, taskIndex: task, rolloutIndex: next };
  });
}

/** The index under the first of `keys` the row has (null counts as none); an error naming the
 * key when it is not an integer from 0 to MAX_INDEX. `raw`: the row's members as text. */
function indexOf(raw: Map<string, string>, keys: string[]): bigint | undefined {
  for (const key of keys) {
    const text = raw.get(key);
    if (text === undefined || text === "null") continue;
    let value: bigint;
    if (/^-?\d+$/.test(text)) value = BigInt(text);
    else if (/^-?\d/.test(text) && Number.isInteger(Number(text))) value = BigInt(Number(text)); // 2.0, 1e3
    else throw new Error(`${key}: must be an integer, got ${text}`);
    if (value < 0n) throw new Error(`${key}: must be >= 0, got ${text}`);
    if (value > MAX_INDEX) throw new Error(`${key}: must be at most ${MAX_INDEX} (indices are 64-bit), got ${text}`);
    return value;
  }
  return undefined;
}

/**
 * The members of a JSON object's text, in order, each value as its text (not parsed, so 1.0
 * stays 1.0 and a large integer keeps its digits). `text` must be valid JSON (JSON.parse it first).
 */
export function members(text: string): [string, string][] {
  const out: [string, string][] = [];
  const ws = (i: number): number => {
    while (i < text.length && " \t\r\n".includes(text[i])) i++;
    return i;
  };
  const endOfString = (i: number): number => {
    for (i++; text[i] !== '"'; i++) if (text[i] === "\\") i++;
    return i + 1;
  };
  const endOfValue = (i: number): number => {
    if (text[i] === '"') return endOfString(i);
    if (text[i] === "{" || text[i] === "[") {
      let depth = 0;
      for (; ; i++) {
        const c = text[i];
        if (c === '"') i = endOfString(i) - 1;
        else if (c === "{" || c === "[") depth++;
        else if ((c === "}" || c === "]") && --depth === 0) return i + 1;
      }
    }
    while (i < text.length && !",}] \t\r\n".includes(text[i])) i++;
    return i;
  };
  let i = ws(0);
  if (text[i] !== "{") throw new Error("not a JSON object");
  i = ws(i + 1);
  while (text[i] === '"') {
    const keyEnd = endOfString(i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    const valueStart = ws(ws(keyEnd) + 1); // past the ':'
    const valueEnd = endOfValue(valueStart);
    out.push([key, text.slice(valueStart, valueEnd)]);
    i = ws(valueEnd);
    if (text[i] === ",") i = ws(i + 1);
  }
  return out;
}

/** The agents of rollouts, in order of first appearance. */
export function agents(rollouts: Rollout[]): string[] {
  return [...new Set(rollouts.map((r) => r.agent))];
}

/** A rollout and what verify answered for it. */
export interface Verified extends Rollout {
  reward: number;
  /** The full verify response ("" when the rollout failed verification, or was finished
   * already and so not verified again). */
  responseJson: string;
  errorKind: VerifyErrorKind;
  errorMessage: string;
}

/** Consecutive batches [start, end) of `sizes.length` rows: at most `count` rows and, beyond
 * one row, `limits.maxBatchBytes` of text each; a row past `limits.maxRowBytes` is an error
 * naming its line. */
export function batchSpans(sizes: number[], count: number, lineOf: (i: number) => number, what = "the row"): [number, number][] {
  const out: [number, number][] = [];
  let bytes = 0;
  sizes.forEach((size, i) => {
    if (size > limits.maxRowBytes) {
      throw new Error(`line ${lineOf(i)}: ${what} is ${(size / (1 << 20)).toFixed(1)} MB of JSON, past the ` +
        `${(limits.maxRowBytes / (1 << 20)).toFixed(1)} MB one gRPC message carries (the server's limit)`);
    }
    const last = out[out.length - 1];
    if (!last || last[1] - last[0] >= count || bytes + size > limits.maxBatchBytes) {
      out.push([i, i + 1]);
      bytes = 0;
    } else last[1] = i + 1;
    bytes += size;
  });
  return out;
}

/** A finished row's `reward` as its line holds it: text stays text (which `reward`, a number,
 * reads as 0), so what a client prints is what `gym-metrics collect` writes. */
export function rowReward(row: string): unknown {
  return (JSON.parse(row) as { reward?: unknown }).reward;
}

/** A finished row's reward as a number (true/false 1/0; 0 when not a number). */
function storedReward(row: string): number {
  const reward = rowReward(row);
  return typeof reward === "number" ? reward : reward === true ? 1 : 0;
}

/**
 * Verify rollouts over one VerifyStream call in batches of at most `batchSize` rollouts and
 * `limits.maxBatchBytes` of rows, answered in input order. A finished rollout (`finished`) is
 * not sent: its answer is its own reward. Each batch has its own id ("b<n>"): a batch sent
 * again is answered from the server's cache, not verified twice. The server answers each
 * rollout as it finishes (`answerEach`: one slow verify holds back only itself), in parts that
 * carry their `positions`; a batch finished whole comes in order, in parts (`more`) when it
 * passes the message limit. `options.timeoutMs` bounds the call, `options.signal` cancels it.
 */
export async function verifyAll(
  client: Client<typeof ResourcesService>, rollouts: Rollout[], batchSize = 256, options?: CallOptions,
): Promise<Verified[]> {
  const out: Verified[] = new Array(rollouts.length);
  const todo: number[] = [];
  rollouts.forEach((r, i) => {
    if (r.finished) out[i] = { ...r, reward: storedReward(r.row), responseJson: "", errorKind: VerifyErrorKind.UNSPECIFIED, errorMessage: "" };
    else todo.push(i);
  });
  const spans = batchSpans(todo.map((i) => Buffer.byteLength(rollouts[i].row)), batchSize, (i) => rollouts[todo[i]].line);
  if (todo.length === 0) return out;
  async function* batches(): AsyncIterable<VerifyStreamRequest> {
    for (const [n, [start, end]] of spans.entries()) {
      yield {
        $typeName: "gym_metrics.v1.VerifyStreamRequest",
        batchId: `b${n}`,
        answerEach: true,
        items: todo.slice(start, end).map((at) => rollouts[at]).map((r) => ({
          $typeName: "gym_metrics.v1.VerifyItem" as const, taskIndex: r.taskIndex, rolloutIndex: r.rolloutIndex, bodyJson: r.row,
        })),
      };
    }
  }
  let received = 0;
  const done = new Map<string, number>(); // results of a batch answered in parts so far (`more`)
  try {
    for await (const answer of client.verifyStream(batches(), callOptions(options)())) {
      const n = Number(answer.batchId.slice(1));
      const span = spans[n];
      if (!/^b\d+$/.test(answer.batchId) || !span) throw new Error(`VerifyStream answered an unknown batch ${JSON.stringify(answer.batchId)}`);
      const before = done.get(answer.batchId) ?? 0; // unpositioned parts follow each other in order
      if (answer.positions.length === 0) {
        if (answer.more) done.set(answer.batchId, before + answer.results.length);
        else done.delete(answer.batchId);
      }
      answer.results.forEach((result, i) => {
        const at = span[0] + (answer.positions.length ? answer.positions[i] : before + i);
        if (!(at < span[1])) throw new Error(`batch ${answer.batchId} answered more results than it had rollouts`);
        const rollout = rollouts[todo[at]];
        out[todo[at]] = { ...rollout, reward: result.reward, responseJson: result.responseJson,
          errorKind: result.errorKind, errorMessage: result.errorMessage };
        received++;
      });
    }
  } catch (err) {
    throw callError(err, options);
  }
  if (received !== todo.length) throw new Error(`VerifyStream ended after ${received} of ${todo.length} rollouts`);
  return out;
}

const CARRIED_KEYS = ["_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source", "skills_ref", "_ng_attempt_index", "_ng_rollout_id"];
const REQUEST_KEYS = ["responses_create_params", "response"];

/**
 * The row AggregateMetrics reads for a rollout, as `collect` writes it (NeMo Gym's rule): for
 * a verified rollout, the verify response; the request's `responses_create_params` and
 * `response` where the response has none; the request's indices, `agent_ref` and a few other
 * keys. Other input columns are not written, so not aggregated. A failed rollout keeps its
 * request row, a finished one its whole row. Either way the row holds the assigned indices.
 * Values keep their text (spliced, not parsed and written again): 1.0 stays 1.0, so the
 * server types it a float, as it does for `collect`'s rows.
 */
export function writtenRow(rollout: Rollout, responseJson: string): string {
  const request = new Map(members(rollout.row));
  const row = responseJson === "" || rollout.finished ? new Map(request) : new Map(members(responseJson));
  for (const key of REQUEST_KEYS) if (!row.has(key) && request.has(key)) row.set(key, request.get(key)!);
  for (const key of CARRIED_KEYS) if (request.has(key)) row.set(key, request.get(key)!);
  row.set("_ng_task_index", String(rollout.taskIndex));
  row.set("_ng_rollout_index", String(rollout.rolloutIndex));
  return `{${[...row].map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(",")}}`;
}

/**
 * One agent's verified rollouts through AggregateMetrics, as rows (the server reads their
 * numeric fields), in batches of at most `batchSize` rows and `limits.maxBatchBytes` of text;
 * the answer's parts reassembled. `options` as verifyAll's.
 */
export async function aggregate(
  client: Client<typeof ResourcesService>, agent: string, verified: Verified[], options?: AggregateOptions, batchSize = 10_000,
  callOpts?: CallOptions,
): Promise<AggregateMetricsResponse> {
  const mine = verified.filter((v) => v.agent === agent);
  const rows = mine.map((v) => writtenRow(v, v.responseJson));
  const spans = batchSpans(rows.map((row) => Buffer.byteLength(row)), batchSize, (i) => mine[i].line, "the written row");
  async function* requests(): AsyncIterable<AggregateMetricsRequest> {
    yield { $typeName: "gym_metrics.v1.AggregateMetricsRequest", payload: { case: "header", value: {
      $typeName: "gym_metrics.v1.AggregateMetricsHeader", agentRef: { $typeName: "gym_metrics.v1.AgentRef", name: agent },
      options, expectedRolloutsPerTask: 0, expectedTaskIndices: [] } } };
    for (const [n, [start, end]] of spans.entries()) {
      const batch = mine.slice(start, end);
      const failed = batch.some((v) => v.errorKind !== VerifyErrorKind.UNSPECIFIED);
      yield { $typeName: "gym_metrics.v1.AggregateMetricsRequest", payload: { case: "batch", value: {
        $typeName: "gym_metrics.v1.RolloutBatch", batchId: `a${n}`, taskIndex: batch.map((v) => v.taskIndex),
        rolloutIndex: batch.map((v) => v.rolloutIndex), columns: {}, masked: [], shown: {},
        rowJson: rows.slice(start, end), errorKind: failed ? batch.map((v) => v.errorKind) : [] } } };
    }
  }
  const parts: AggregateMetricsResponse[] = [];
  try {
    for await (const part of client.aggregateMetrics(requests(), callOptions(callOpts)())) parts.push(part);
  } catch (err) {
    throw callError(err, callOpts);
  }
  return reassemble(parts);
}

/**
 * The parts of one AggregateMetrics answer as one: the first part holds every field and the
 * first tasks; each later part the next tasks' group_level_metrics and rollout_infos. A stats
 * key absent from a part is NaN for its tasks; a rollout_infos column absent from a part is
 * missing for its rollouts; `missing` positions are per part, shifted by the rollouts before.
 */
export function reassemble(parts: AggregateMetricsResponse[]): AggregateMetricsResponse {
  if (parts.length === 0) throw new Error("AggregateMetrics answered no part");
  if (!parts[parts.length - 1].last) throw new Error("AggregateMetrics answer ended before its last part");
  const whole = clone(AggregateMetricsResponseSchema, parts[0]);
  const g = whole.metrics?.groupLevelMetrics;
  if (g) for (const part of parts.slice(1)) appendGroups(g, part.metrics?.groupLevelMetrics);
  whole.last = true;
  return whole;
}

function appendGroups(g: GroupLevelMetrics, more: GroupLevelMetrics | undefined): void {
  if (!more) return;
  const before = g.taskIndex.length, adding = more.taskIndex.length;
  g.taskIndex.push(...more.taskIndex);
  for (const key of Object.keys(more.stats)) g.stats[key] ??= create(DoubleColumnSchema, { values: nans(before) });
  for (const [key, column] of Object.entries(g.stats)) column.values.push(...(more.stats[key]?.values ?? nans(adding)));
  g.numRollouts.push(...more.numRollouts);
  g.expectedNumRollouts.push(...more.expectedNumRollouts);
  g.missingNumRollouts.push(...more.missingNumRollouts);
  g.rewardProfileCompletionPct.push(...more.rewardProfileCompletionPct);
  g.sampleJson.push(...more.sampleJson);
  g.customJson.push(...more.customJson);
  if (more.rolloutInfos) {
    g.rolloutInfos ??= create(RolloutInfosSchema);
    appendInfos(g.rolloutInfos, more.rolloutInfos);
  }
}

function appendInfos(infos: RolloutInfos, more: RolloutInfos): void {
  const before = infos.taskIndex.length, adding = more.taskIndex.length;
  infos.taskIndex.push(...more.taskIndex);
  infos.rolloutIndex.push(...more.rolloutIndex);
  for (const [key, added] of Object.entries(more.values)) {
    infos.values[key] ??= create(NumericColumnSchema, { values: zeros(before), missing: range(0, before), kind: added.kind });
  }
  for (const [key, column] of Object.entries(infos.values)) {
    const added = more.values[key];
    if (!added) {
      column.values.push(...zeros(adding));
      column.missing.push(...range(before, adding));
      continue;
    }
    column.values.push(...added.values);
    column.missing.push(...added.missing.map((at) => at + before));
  }
  for (const [key, column] of Object.entries(infos.shown)) {
    if (!(key in more.shown)) appendShownFromValues(column, more.values[key], before, adding);
  }
  for (const [key, added] of Object.entries(more.shown)) {
    const column = (infos.shown[key] ??= create(ShownColumnSchema, { values: zeros(before), missing: range(0, before) }));
    column.values.push(...added.values);
    column.missing.push(...added.missing.map((at) => at + before));
    column.ints.push(...added.ints.map((at) => at + before));
    for (const [at, text] of Object.entries(added.json)) column.json[Number(at) + before] = text;
  }
}

/** A part's values column (undefined: the key absent) shown as its shown column. */
function appendShownFromValues(column: ShownColumn, values: NumericColumn | undefined, before: number, adding: number): void {
  if (!values) {
    column.values.push(...zeros(adding));
    column.missing.push(...range(before, adding));
    return;
  }
  column.values.push(...values.values);
  column.missing.push(...values.missing.map((at) => at + before));
  if (values.kind === ValueKind.INT) {
    const missing = new Set(values.missing);
    for (let at = 0; at < adding; at++) if (!missing.has(at)) column.ints.push(before + at);
  }
}

const nans = (n: number): number[] => new Array(n).fill(NaN);
const zeros = (n: number): number[] => new Array(n).fill(0);
const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

/** A finished job's result as `gym-metrics evaluate` writes it. */
export interface JobResult {
  job: Job;
  aggregateScores: unknown[];
  rowScores: unknown[];
}

/** How many times `submitJob` sends a submission whose answer did not come. */
export const SUBMIT_ATTEMPTS = 3;

/**
 * Queue `spec` with a fresh `requestId` (a UUID4), sending the same request again when its
 * answer did not come (Unavailable: a broken connection): the server answers the job the first
 * attempt stored, never a second one (SubmitJobRequest.request_id, AIP-155).
 */
export async function submitJob(client: Client<typeof JobService>, spec: JobSpec, options?: CallOptions): Promise<Job> {
  const call = callOptions(options);
  const request = { spec, requestId: randomUUID() };
  for (let attempt = 1; ; attempt++) {
    try {
      return (await client.submitJob(request, call())).job!;
    } catch (err) {
      const code = ConnectError.from(callError(err, options)).code;
      if (attempt === SUBMIT_ATTEMPTS || options?.signal?.aborted || (code !== Code.Unavailable && code !== Code.DeadlineExceeded)) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, attempt * 1000));
  }
}

/**
 * Submit `spec` (`submitJob`), follow WatchJob to a final state (`progress` sees each message), and read the
 * result through GetJobResult. A job that did not succeed is an error holding the job.
 * `options.timeoutMs` bounds the three calls together, `options.signal` cancels them.
 */
export async function submitAndWait(
  client: Client<typeof JobService>, spec: JobSpec, progress?: (job: Job) => void, options?: CallOptions,
): Promise<JobResult> {
  const call = callOptions(options);
  try {
    const id = (await submitJob(client, spec, { ...options, timeoutMs: call().timeoutMs })).jobId;
    let job: Job | undefined;
    for await (const message of client.watchJob({ jobId: id }, call())) {
      job = message.job;
      if (job && progress) progress(job);
    }
    if (!job) throw new Error(`WatchJob of ${id} ended without a message`);
    if (job.state !== JobState.SUCCEEDED) throw Object.assign(new Error(`job ${id} ended ${JobState[job.state]}: ${job.error}`), { job });
    const result: JobResult = { job, aggregateScores: [], rowScores: [] };
    for await (const part of client.getJobResult({ jobId: id }, call())) {
      if (part.part.case === "aggregateScoresJson") result.aggregateScores = JSON.parse(part.part.value);
      else if (part.part.case === "rowScores") result.rowScores.push(...part.part.value.rowsJson.map((row) => JSON.parse(row)));
    }
    return result;
  } catch (err) {
    throw callError(err, options);
  }
}

/** The bad fields an INVALID_ARGUMENT answer names (its google.rpc BadRequest), as "field: why". */
export function fieldViolations(err: unknown): string[] {
  const error = ConnectError.from(err);
  if (error.code !== Code.InvalidArgument) return [];
  return error.findDetails(BadRequestSchema).flatMap((bad) => bad.fieldViolations.map((v) => `${v.field}: ${v.description}`));
}
