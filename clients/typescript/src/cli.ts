#!/usr/bin/env node
// The TypeScript client's example: verify and aggregate a rollouts file on a gym-metrics server,
// or run a durable job on a job server, and print what came back as JSON (the same shape as
// the Go client's example, clients/go/cmd/gym-metrics-go).
//
//   gym-metrics-ts verify --server 127.0.0.1:50051 --input rollouts.jsonl
//   gym-metrics-ts job --server 127.0.0.1:50052 --spec spec.json
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { fromJsonString } from "@bufbuild/protobuf";

import {
  JobSpecSchema, JobState, agents, aggregate, connect, fieldViolations, jobsClient, readRollouts, resourcesClient,
  submitAndWait, verifyAll,
} from "./index.js";

async function verify(server: string, input: string): Promise<unknown> {
  const client = resourcesClient(connect(server));
  const rollouts = readRollouts(input);
  const verified = await verifyAll(client, rollouts);
  const out: Record<string, unknown> = {};
  for (const agent of agents(rollouts)) {
    const metrics = (await aggregate(client, agent, verified)).metrics!;
    const g = metrics.groupLevelMetrics!;
    const stats = Object.fromEntries(Object.entries(g.stats).map(([key, column]) =>
      [key, column.values.map((v) => (Number.isFinite(v) ? v : null))]));
    out[agent] = {
      agent_metrics: JSON.parse(metrics.agentMetricsJson), key_metrics: JSON.parse(metrics.keyMetricsJson),
      group_level_metrics: { task_index: g.taskIndex.map(Number), num_rollouts: g.numRollouts.map(Number), stats },
    };
  }
  const rewards = verified.map((v) => ({ agent: v.agent, task_index: Number(v.taskIndex), rollout_index: Number(v.rolloutIndex), reward: v.reward }));
  return { rewards, agents: out };
}

async function job(server: string, specPath: string): Promise<unknown> {
  const spec = fromJsonString(JobSpecSchema, readFileSync(specPath, "utf8"));
  try {
    const result = await submitAndWait(jobsClient(connect(server)), spec);
    return { state: `JOB_STATE_${JobState[result.job.state]}`, aggregate_scores: result.aggregateScores, row_scores: result.rowScores };
  } catch (err) {
    const bad = fieldViolations(err);
    throw bad.length ? new Error(`${(err as Error).message} (fields: ${bad.join("; ")})`) : err;
  }
}

async function main(): Promise<void> {
  const [command, ...rest] = process.argv.slice(2);
  const { values } = parseArgs({ args: rest, options: { server: { type: "string", default: "127.0.0.1:50051" },
    input: { type: "string" }, spec: { type: "string" } } });
  let out: unknown;
  if (command === "verify") out = await verify(values.server!, values.input ?? "");
  else if (command === "job") out = await job(values.server!, values.spec ?? "");
  else throw new Error(`usage: gym-metrics-ts verify|job [--server HOST:PORT] [--input FILE | --spec FILE]`);
  console.log(JSON.stringify(out));
}

main().catch((err: unknown) => {
  console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
