import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import {
  AggregateMetricsResponseSchema, DoubleColumnSchema, GroupLevelMetricsSchema, MetricsSchema, NumericColumnSchema,
  RolloutInfosSchema, readRollouts, reassemble, writtenRow,
} from "../index.js";

function part(tasks: bigint[], stats: Record<string, number[]>, infos: Record<string, [number[], number[]]>, last: boolean) {
  const n = tasks.length * 2;
  return create(AggregateMetricsResponseSchema, {
    last,
    metrics: create(MetricsSchema, { groupLevelMetrics: create(GroupLevelMetricsSchema, {
      taskIndex: tasks, numRollouts: tasks.map(() => 2n),
      stats: Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, create(DoubleColumnSchema, { values: v })])),
      rolloutInfos: create(RolloutInfosSchema, {
        taskIndex: tasks.flatMap((t) => [t, t]), rolloutIndex: tasks.flatMap(() => [0n, 1n]),
        values: Object.fromEntries(Object.entries(infos).map(([k, [values, missing]]) =>
          [k, create(NumericColumnSchema, { values: values.length ? values : new Array(n).fill(0), missing })])),
      }),
    }) }),
  });
}

test("reassemble fills absent keys with NaN and shifts missing positions", () => {
  const whole = reassemble([
    part([0n, 1n], { "mean/reward": [1, 0.5] }, { reward: [[1, 1, 0, 1], [2]] }, false),
    part([2n], { "mean/steps": [3] }, { reward: [[0, 1], [0]], steps: [[3, 3], []] }, true),
  ]);
  const g = whole.metrics!.groupLevelMetrics!;
  assert.deepEqual(g.taskIndex, [0n, 1n, 2n]);
  assert.deepEqual(g.stats["mean/reward"].values, [1, 0.5, NaN]);
  assert.deepEqual(g.stats["mean/steps"].values, [NaN, NaN, 3]);
  assert.deepEqual(g.rolloutInfos!.values.reward.missing, [2, 4]);
  assert.deepEqual(g.rolloutInfos!.values.steps.missing, [0, 1, 2, 3]);
  assert.equal(whole.last, true);
});

test("an answer without its last part is refused", () => {
  assert.throws(() => reassemble([part([0n], {}, {}, false)]), /ended before its last part/);
  assert.throws(() => reassemble([]), /no part/);
});

test("rollouts are indexed as collect indexes them", () => {
  const path = join(mkdtempSync(join(tmpdir(), "gm-ts-")), "in.jsonl");
  writeFileSync(path, ['{"agent_ref":{"name":"a"},"q":"A"}', '{"agent_ref":{"name":"a"},"q":"B","_ng_task_index":0}',
    '{"agent_ref":{"name":"b"},"q":"C","_ng_rollout_index":7}', '{"agent_ref":{"name":"a"},"q":"A"}', ""].join("\n"));
  assert.deepEqual(readRollouts(path).map((r) => [r.taskIndex, r.rolloutIndex]), [[0n, 0n], [0n, 1n], [1n, 0n], [0n, 2n]]);
  writeFileSync(path, '{"q":"no agent"}\n');
  assert.throws(() => readRollouts(path), /:1: agent_ref.name is missing/);
});

test("the written row is what collect writes", () => {
  const request = '{"agent_ref":{"name":"a"},"_ng_task_index":3,"id":"x-17","response":{"usage":{"output_tokens":9}}}';
  const row = JSON.parse(writtenRow({ agent: "a", taskIndex: 3n, rolloutIndex: 2n, line: 1, row: request }, '{"reward":1}'));
  assert.deepEqual(row, { reward: 1, response: { usage: { output_tokens: 9 } }, _ng_task_index: 3, _ng_rollout_index: 2, agent_ref: { name: "a" } });
});
