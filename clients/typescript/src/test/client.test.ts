import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { batchSpans, connect, limits, readRollouts, resourcesClient, submitJob, verifyAll, writtenRow, type Rollout } from "../index.js";

const dir = mkdtempSync(join(tmpdir(), "gm-ts-"));
let files = 0;
function file(text: string): string {
  const path = join(dir, `in${files++}.jsonl`);
  writeFileSync(path, text);
  return path;
}
const keys = (text: string) => readRollouts(file(text)).map((r) => `${r.taskIndex}/${r.rolloutIndex}/${r.finished}`).join(" ");

test("lines are compared with their ending: CRLF is a newline, a last line without one is another task", () => {
  const a = '{"agent_ref":{"name":"a"},"q":"A"}';
  assert.equal(keys(`${a}\n${a}\r\n${a}`), "0/0/false 0/1/false 1/0/false");
});

test("finished rollouts keep their keys and are passed over; a key on two lines is refused", () => {
  const text = ['{"agent_ref":{"name":"a"},"_ng_task_index":0,"_ng_rollout_index":1,"reward":0.5}',
    '{"agent_ref":{"name":"a"},"_ng_task_index":0}', '{"agent_ref":{"name":"a"},"_ng_task_index":0,"reward":1.0}',
    '{"agent_ref":{"name":"a"},"task_index":3,"rollout_index":5,"reward":0}', ""].join("\n");
  assert.equal(keys(text), "0/1/true 0/0/false 0/2/true 3/5/true");
  const twice = file(text + '{"agent_ref":{"name":"a"},"task_index":3,"_ng_rollout_index":5,"reward":1}\n');
  assert.throws(() => readRollouts(twice), /:5: rollouts given twice: \("a", 3, 5\) again \(first at line 4\)/);
});

test("a task index must be an integer, named with its file and line", () => {
  for (const [value, want] of [['"3"', 'must be an integer, got "3"'], ["true", "must be an integer, got true"],
    ["1.5", "must be an integer, got 1.5"], ["-1", "must be >= 0, got -1"], [String(2n ** 63n), "must be at most"]]) {
    const path = file(`{"agent_ref":{"name":"a"},"_ng_task_index":${value}}\n`);
    assert.throws(() => readRollouts(path), (err: Error) => err.message.startsWith(`${path}:1: _ng_task_index: ${want}`), value);
  }
  assert.equal(keys('{"agent_ref":{"name":"a"},"_ng_task_index":2.0}\n'), "2/0/false");
});

test("the written row keeps the response's text: 1.0 stays 1.0", () => {
  const rollout: Rollout = { agent: "a", taskIndex: 3n, rolloutIndex: 0n, line: 1, row: '{"agent_ref":{"name":"a"},"x":"1.0"}' };
  assert.equal(writtenRow(rollout, '{"reward": 1.0, "s": "a,}\\"]"}'), '{"reward":1.0,"s":"a,}\\"]","agent_ref":{"name":"a"},"_ng_task_index":3,"_ng_rollout_index":0}');
});

test("batches are capped by bytes; a row past the message limit names its line", () => {
  const saved = { ...limits };
  try {
    limits.maxBatchBytes = 3500;
    assert.deepEqual(batchSpans(Array(10).fill(1000), 256, (i) => i + 1), [[0, 3], [3, 6], [6, 9], [9, 10]]);
    limits.maxRowBytes = 1500;
    assert.throws(() => batchSpans([1000, 2000], 256, (i) => i + 7), /^Error: line 8: the row is/);
  } finally {
    Object.assign(limits, saved);
  }
});

const one: Rollout[] = [{ agent: "a", taskIndex: 0n, rolloutIndex: 0n, line: 1, row: '{"agent_ref":{"name":"a"}}' }];

test("a server that never answers ends at the timeout", { timeout: 10_000 }, async () => {
  const sockets: net.Socket[] = [];
  const server = net.createServer((socket) => sockets.push(socket)).listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const client = resourcesClient(connect(`127.0.0.1:${(server.address() as net.AddressInfo).port}`));
  const started = Date.now();
  await assert.rejects(verifyAll(client, one, 256, { timeoutMs: 300 }), (err) => ConnectError.from(err).code === Code.DeadlineExceeded);
  assert.ok(Date.now() - started < 3000);
  sockets.forEach((socket) => socket.destroy());
  server.close();
});

test("a stream the server closes is Unavailable, not Canceled", { timeout: 10_000 }, async () => {
  const server = http2.createServer();
  const sessions: http2.ServerHttp2Session[] = [];
  server.on("session", (session) => sessions.push(session));
  server.on("stream", (stream) => {
    stream.respond({ ":status": 200, "content-type": "application/grpc" });
    stream.once("data", () => stream.close(http2.constants.NGHTTP2_CANCEL));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const client = resourcesClient(connect(`127.0.0.1:${(server.address() as net.AddressInfo).port}`));
  await assert.rejects(verifyAll(client, one, 256, { timeoutMs: 5000 }), (err) => ConnectError.from(err).code === Code.Unavailable);
  sessions.forEach((session) => session.destroy());
  server.close();
});

test("a submission whose answer was lost is sent again with its request_id", { timeout: 10_000 }, async () => {
  const sent: string[] = [];
  const fake = {
    async submitJob(request: { requestId: string }) {
      sent.push(request.requestId);
      if (sent.length === 1) throw new ConnectError("connection broken after the job was stored", Code.Unavailable);
      return { job: { jobId: `job-${request.requestId.slice(0, 8)}` } };
    },
  };
  const job = await submitJob(fake as never, {} as never);
  assert.equal(sent.length, 2);
  assert.equal(sent[0], sent[1]);
  assert.match(sent[0], /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(job.jobId, `job-${sent[0].slice(0, 8)}`);
});
