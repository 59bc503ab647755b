#!/usr/bin/env node
// The TypeScript client's example: verify and aggregate a rollouts file on a gym-metrics server,
// or run a durable job on a job server, and print what came back as JSON (the same shape as
// the Go client's example, clients/go/cmd/gym-metrics-go).
//
//   gym-metrics-ts verify --server 127.0.0.1:50051 --input rollouts.jsonl
//   gym-metrics-ts job --server 127.0.0.1:50052 --spec spec.json
//
// --timeout bounds the whole run (5m by default, as the Go example: 90s, 1500ms, 2m, or
// seconds); --auth-token-env VAR sends the token in $VAR as `authorization: Bearer ...`;
// --tls-ca FILE connects with TLS, trusting that PEM root certificate.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { fromJsonString } from "@bufbuild/protobuf";
import { ConnectError, type CallOptions, type Transport } from "@connectrpc/connect";

import {
  JobSpecSchema, JobState, agents, aggregate, connect, fieldViolations, jobsClient, readRollouts, resourcesClient, rowReward,
  submitAndWait, tokenFromEnv, verifyAll,
} from "./index.js";

/** What is left of the run's time, for the next helper. */
type Remaining = () => CallOptions;

async function verify(transport: Transport, input: string, left: Remaining): Promise<string> {
  const client = resourcesClient(transport);
  const rollouts = readRollouts(input);
  const verified = await verifyAll(client, rollouts, 256, left());
  const out: string[] = [];
  for (const agent of agents(rollouts)) {
    const metrics = (await aggregate(client, agent, verified, undefined, 10_000, left())).metrics!;
    const g = metrics.groupLevelMetrics!;
    const stats = Object.fromEntries(Object.entries(g.stats).map(([key, column]) =>
      [key, column.values.map((v) => (Number.isFinite(v) ? v : null))]));
    const groups = JSON.stringify({ task_index: g.taskIndex.map(Number), num_rollouts: g.numRollouts.map(Number), stats });
    // The metrics' JSON as the server wrote it (1.0 stays 1.0), as the Go example prints it.
    out.push(`${JSON.stringify(agent)}:{"agent_metrics":${metrics.agentMetricsJson},"key_metrics":${metrics.keyMetricsJson},` +
      `"group_level_metrics":${groups}}`);
  }
  const rewards = verified.map((v) => ({ agent: v.agent, task_index: Number(v.taskIndex), rollout_index: Number(v.rolloutIndex), reward: v.finished ? rowReward(v.row) : v.reward }));
  return `{"rewards":${JSON.stringify(rewards)},"agents":{${out.join(",")}}}`;
}

async function job(transport: Transport, specPath: string, left: Remaining): Promise<string> {
  const spec = fromJsonString(JobSpecSchema, readFileSync(specPath, "utf8"));
  try {
    const result = await submitAndWait(jobsClient(transport), spec, undefined, left());
    return JSON.stringify({ state: `JOB_STATE_${JobState[result.job.state]}`, aggregate_scores: result.aggregateScores, row_scores: result.rowScores });
  } catch (err) {
    const bad = fieldViolations(err);
    throw bad.length ? new Error(`${(err as Error).message} (fields: ${bad.join("; ")})`) : err;
  }
}

/** A duration as the Go example's -timeout takes it (300ms, 90s, 5m, 1h, 1m30s), or seconds. */
export function parseDuration(text: string): number {
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) throw new Error(`--timeout ${text}: expected a duration (90s, 1500ms, 5m) or seconds`);
  return parts.reduce((ms, p) => ms + Number(p[1]) * units[p[2]], 0);
}

async function main(): Promise<void> {
  const [command, ...rest] = process.argv.slice(2);
  const { values } = parseArgs({ args: rest, options: { server: { type: "string", default: "127.0.0.1:50051" },
    input: { type: "string" }, spec: { type: "string" }, timeout: { type: "string", default: "5m" },
    "auth-token-env": { type: "string" }, "tls-ca": { type: "string" } } });
  if (command !== "verify" && command !== "job") {
    throw new Error(`usage: gym-metrics-ts verify|job [--server HOST:PORT] [--input FILE | --spec FILE] [--timeout 5m] ` +
      `[--auth-token-env VAR] [--tls-ca FILE]`);
  }
  const timeoutMs = parseDuration(values.timeout!);
  const end = Date.now() + timeoutMs;
  const left: Remaining = () => ({ timeoutMs: Math.max(1, end - Date.now()) });
  const tlsCa = values["tls-ca"] === undefined ? undefined : readFileSync(values["tls-ca"]);
  const transport = connect(values.server!, { token: tokenFromEnv(values["auth-token-env"]), tlsCa });
  // A stuck step outside a call (none is known) ends too.
  const watchdog = setTimeout(() => fail(`no answer within ${values.timeout} (--timeout)`), timeoutMs + 5000);
  watchdog.unref();
  const out = command === "verify" ? await verify(transport, values.input ?? "", left) : await job(transport, values.spec ?? "", left);
  console.log(out);
}

function fail(message: string): never {
  console.error(`error: ${message}`);
  process.exit(1);
}

main().catch((err: unknown) => {
  fail(err instanceof ConnectError ? `[${codeName(err)}] ${err.message}` : err instanceof Error ? err.message : String(err));
});

function codeName(err: ConnectError): string {
  // connect's message starts with the code in brackets already; keep the gRPC name too
  return ["OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"][err.code] ?? String(err.code);
}
