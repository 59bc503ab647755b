// gym-metrics' TypeScript client: the generated contract (./gen, connect-es) and helpers that
// follow docs/grpc.md: read a rollouts file as `collect` indexes it, verify it over
// VerifyStream, aggregate each agent with its parts reassembled, run a durable job.
import { readFileSync } from "node:fs";

import { clone, create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
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

/** A connection to a gym-metrics server (`serve`) or job server (`jobs serve`), HOST:PORT. */
export function connect(address: string): Transport {
  return createGrpcTransport({ baseUrl: `http://${address}` });
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
  /** The line's JSON object, as text. */
  row: string;
}

/**
 * A JSONL file of rollouts to verify, indexed as `gym-metrics collect` (and NeMo Gym's
 * collection) index them, line by line: a line keeps its `_ng_task_index`; one without gets the
 * index of the first identical line before it (as text), or the next new index. Rollout
 * indices count per task over every agent, in file order (a given `_ng_rollout_index` is
 * replaced). A line without `agent_ref.name` is an error naming its line.
 */
export function readRollouts(path: string): Rollout[] {
  const rollouts: Rollout[] = [];
  const taskOf = new Map<string, bigint>();
  const rolloutsOf = new Map<bigint, bigint>();
  let next = 0n;
  readFileSync(path, "utf8").split("\n").forEach((text, i) => {
    if (text === "") return;
    let head: { agent_ref?: { name?: string }; _ng_task_index?: number };
    try {
      head = JSON.parse(text);
    } catch (err) {
      throw new Error(`${path}:${i + 1}: not a JSON object: ${(err as Error).message}`);
    }
    const agent = head?.agent_ref?.name;
    if (typeof agent !== "string" || agent === "") throw new Error(`${path}:${i + 1}: agent_ref.name is missing`);
    let taskIndex: bigint;
    if (typeof head._ng_task_index === "number") taskIndex = BigInt(head._ng_task_index);
    else if (taskOf.has(text)) taskIndex = taskOf.get(text)!;
    else {
      taskIndex = next++;
      taskOf.set(text, taskIndex);
    }
    const rolloutIndex = rolloutsOf.get(taskIndex) ?? 0n;
    rolloutsOf.set(taskIndex, rolloutIndex + 1n);
    rollouts.push({ agent, taskIndex, rolloutIndex, line: i + 1, row: text });
  });
  return rollouts;
}

/** The agents of rollouts, in order of first appearance. */
export function agents(rollouts: Rollout[]): string[] {
  return [...new Set(rollouts.map((r) => r.agent))];
}

/** A rollout and what verify answered for it. */
export interface Verified extends Rollout {
  reward: number;
  /** The full verify response ("" when the rollout failed verification). */
  responseJson: string;
  errorKind: VerifyErrorKind;
  errorMessage: string;
}

/**
 * Verify rollouts over one VerifyStream call in batches of `batchSize`, answered in input
 * order. Each batch has its own id ("b<n>"): a batch sent again is answered from the server's
 * cache, not verified twice. The server answers each rollout as it finishes (`answerEach`:
 * one slow verify holds back only itself), in parts that carry their `positions`; a batch
 * finished whole comes in order, in parts (`more`) when it passes the message limit.
 */
export async function verifyAll(
  client: Client<typeof ResourcesService>, rollouts: Rollout[], batchSize = 256,
): Promise<Verified[]> {
  async function* batches(): AsyncIterable<VerifyStreamRequest> {
    for (let start = 0, n = 0; start < rollouts.length; start += batchSize, n++) {
      yield {
        $typeName: "gym_metrics.v1.VerifyStreamRequest",
        batchId: `b${n}`,
        answerEach: true,
        items: rollouts.slice(start, start + batchSize).map((r) => ({
          $typeName: "gym_metrics.v1.VerifyItem" as const, taskIndex: r.taskIndex, rolloutIndex: r.rolloutIndex, bodyJson: r.row,
        })),
      };
    }
  }
  const out: Verified[] = new Array(rollouts.length);
  let received = 0;
  const done = new Map<string, number>(); // results of a batch answered in parts so far (`more`)
  for await (const answer of client.verifyStream(batches())) {
    const n = Number(answer.batchId.slice(1));
    const before = done.get(answer.batchId) ?? 0; // unpositioned parts follow each other in order
    if (answer.positions.length === 0) {
      if (answer.more) done.set(answer.batchId, before + answer.results.length);
      else done.delete(answer.batchId);
    }
    answer.results.forEach((result, i) => {
      const at = n * batchSize + (answer.positions.length ? answer.positions[i] : before + i);
      if (!(at < rollouts.length)) throw new Error(`batch ${answer.batchId} answered more results than it had rollouts`);
      out[at] = { ...rollouts[at], reward: result.reward, responseJson: result.responseJson,
        errorKind: result.errorKind, errorMessage: result.errorMessage };
      received++;
    });
  }
  if (received !== rollouts.length) throw new Error(`VerifyStream ended after ${received} of ${rollouts.length} rollouts`);
  return out;
}

const CARRIED_KEYS = ["_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source", "skills_ref", "_ng_attempt_index", "_ng_rollout_id"];
const REQUEST_KEYS = ["responses_create_params", "response"];

/**
 * The row AggregateMetrics reads for a verified rollout, as `collect` writes it (NeMo Gym's
 * rule): the verify response; the request's `responses_create_params` and `response` where the
 * response has none; the request's indices, `agent_ref` and a few other keys. Other input
 * columns are not written, so not aggregated. A failed rollout keeps its request row. Either
 * way the row holds the assigned indices.
 */
export function writtenRow(rollout: Rollout, responseJson: string): string {
  const request = JSON.parse(rollout.row) as Record<string, unknown>;
  const row: Record<string, unknown> = responseJson === "" ? { ...request } : JSON.parse(responseJson);
  for (const key of REQUEST_KEYS) if (!(key in row) && key in request) row[key] = request[key];
  for (const key of CARRIED_KEYS) if (key in request) row[key] = request[key];
  // JSON.stringify cannot write a bigint: the indices go in as numbers (they are < 2^53)
  row._ng_task_index = Number(rollout.taskIndex);
  row._ng_rollout_index = Number(rollout.rolloutIndex);
  return JSON.stringify(row);
}

/**
 * One agent's verified rollouts through AggregateMetrics, as rows (the server reads their
 * numeric fields), in batches of `batchSize`; the answer's parts reassembled.
 */
export async function aggregate(
  client: Client<typeof ResourcesService>, agent: string, verified: Verified[], options?: AggregateOptions, batchSize = 10_000,
): Promise<AggregateMetricsResponse> {
  const mine = verified.filter((v) => v.agent === agent);
  async function* requests(): AsyncIterable<AggregateMetricsRequest> {
    yield { $typeName: "gym_metrics.v1.AggregateMetricsRequest", payload: { case: "header", value: {
      $typeName: "gym_metrics.v1.AggregateMetricsHeader", agentRef: { $typeName: "gym_metrics.v1.AgentRef", name: agent },
      options, expectedRolloutsPerTask: 0, expectedTaskIndices: [] } } };
    for (let start = 0, n = 0; start < mine.length; start += batchSize, n++) {
      const rows = mine.slice(start, start + batchSize);
      const failed = rows.some((v) => v.errorKind !== VerifyErrorKind.UNSPECIFIED);
      yield { $typeName: "gym_metrics.v1.AggregateMetricsRequest", payload: { case: "batch", value: {
        $typeName: "gym_metrics.v1.RolloutBatch", batchId: `a${n}`, taskIndex: rows.map((v) => v.taskIndex),
        rolloutIndex: rows.map((v) => v.rolloutIndex), columns: {}, masked: [], shown: {},
        rowJson: rows.map((v) => writtenRow(v, v.responseJson)), errorKind: failed ? rows.map((v) => v.errorKind) : [] } } };
    }
  }
  const parts: AggregateMetricsResponse[] = [];
  for await (const part of client.aggregateMetrics(requests())) parts.push(part);
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

/**
 * Submit `spec`, follow WatchJob to a final state (`progress` sees each message), and read the
 * result through GetJobResult. A job that did not succeed is an error holding the job.
 */
export async function submitAndWait(
  client: Client<typeof JobService>, spec: JobSpec, progress?: (job: Job) => void,
): Promise<JobResult> {
  const submitted = await client.submitJob({ spec });
  const id = submitted.job!.jobId;
  let job: Job | undefined;
  for await (const message of client.watchJob({ jobId: id })) {
    job = message.job;
    if (job && progress) progress(job);
  }
  if (!job) throw new Error(`WatchJob of ${id} ended without a message`);
  if (job.state !== JobState.SUCCEEDED) throw Object.assign(new Error(`job ${id} ended ${JobState[job.state]}: ${job.error}`), { job });
  const result: JobResult = { job, aggregateScores: [], rowScores: [] };
  for await (const part of client.getJobResult({ jobId: id })) {
    if (part.part.case === "aggregateScoresJson") result.aggregateScores = JSON.parse(part.part.value);
    else if (part.part.case === "rowScores") result.rowScores.push(...part.part.value.rowsJson.map((row) => JSON.parse(row)));
  }
  return result;
}

/** The bad fields an INVALID_ARGUMENT answer names (its google.rpc BadRequest), as "field: why". */
export function fieldViolations(err: unknown): string[] {
  const error = ConnectError.from(err);
  if (error.code !== Code.InvalidArgument) return [];
  return error.findDetails(BadRequestSchema).flatMap((bad) => bad.fieldViolations.map((v) => `${v.field}: ${v.description}`));
}
