// Hedging (ClientOptions.hedgeDelayMs), as the Go client does it
// (sdk/client/hedge.go): an attempt of a call that may run twice, whose
// node has not answered within the hedge delay, also goes to another node,
// and the first answer is the call's. Against a real 3-node cluster with
// one member paused (SIGSTOP: its connections stay open, nothing answers).
// Every client here makes one attempt with a 10-minute deadline, so a call
// that was not hedged would not come back within the test's time.

import { after, test } from "node:test";
import assert from "node:assert/strict";
import { Server, freePort } from "./server.js";
import { createClient as nodeClient } from "../src/node.js";
import { Code, RewindError, createClient as webClient, text } from "../src/index.js";

const servers: Server[] = [];
after(async () => {
  for (const s of servers) s.resume();
  await Promise.all(servers.map((s) => s.close()));
});

const slow = { attempts: 1, attemptTimeoutMs: 600_000, retryWindowMs: 0, hedgeDelayMs: 300 };

test("calls through a paused member are hedged to another one; a publish without idempotency keys is not", { timeout: 300_000 }, async () => {
  const ports = await Promise.all([freePort(), freePort(), freePort()]);
  const initial = ports.map((p, i) => `${i + 1}=127.0.0.1:${p}`).join(",");
  const nodes = await Promise.all(
    ports.map((port, i) => Server.start({ port, extra: ["--node-id", String(i + 1), "--initial-cluster", initial] })),
  );
  servers.push(...nodes);
  const urls = nodes.map((n) => n.url);
  const setup = nodeClient({ nodes: urls, attemptTimeoutMs: 60_000, retryWindowMs: 120_000 });
  // A fresh cluster may still be electing its metadata leader.
  for (const deadline = Date.now() + 120_000; ; ) {
    const err = await setup.createTopic("hedge", { partitions: 1, replicationFactor: 3 }).then(
      () => undefined,
      (e: RewindError) => e,
    );
    if (!err || err.code === Code.AlreadyExists) break;
    if (err.code !== Code.Unavailable || Date.now() > deadline) throw err;
    await new Promise((r) => setTimeout(r, 200));
  }
  await setup.publish("hedge", { value: "before" }, { idempotencyKey: "before" });
  // Pause a member that does not lead the partition (a paused leader is
  // the server's failover, not the client's), and give it first.
  const status = await setup.clusterStatus();
  const leader = Number(status.partitions.find((p) => p.topic === "hedge")!.leader);
  const victim = [1, 2, 3].find((id) => id !== leader)!;
  const order = [urls[victim - 1], ...urls.filter((_, i) => i !== victim - 1)];
  nodes[victim - 1].pause();

  for (const [name, mk] of [
    ["node connect", () => nodeClient({ nodes: order, ...slow })],
    ["fetch connect", () => webClient({ nodes: order, ...slow })],
  ] as const) {
    // A publish whose records all have idempotency keys: hedged, stored once.
    const c = mk();
    const [r] = await c.publish("hedge", { value: `keyed ${name}` }, { idempotencyKey: `keyed ${name}` });
    assert.equal(r.duplicate, false, name);
    // The paused member is skipped now: the next call goes elsewhere at once.
    assert.notEqual(c.pick().url, order[0], name);
    // A read through a fresh client: hedged too.
    const topics = await mk().listTopics();
    assert.ok(topics.some((t) => t.name === "hedge"), name);
    // A publish with a record without a key could be stored twice by a
    // hedge: it waits for its node, and its attempt's deadline ends it.
    const unkeyed = nodeClient({ nodes: order, ...slow, attemptTimeoutMs: 1500 });
    await assert.rejects(unkeyed.publish("hedge", { value: "unkeyed" }), (e: unknown) => {
      assert.ok(e instanceof RewindError, String(e));
      assert.equal(e.code, Code.DeadlineExceeded, `${name}: code ${Code[e.code]}: ${e.message}`);
      return true;
    });
  }
  nodes[victim - 1].resume();
  // Each keyed record is stored once, although the paused member got it
  // too and handles it on resuming (its idempotency key makes that a
  // duplicate). The unkeyed ones may be stored by it then: their requests
  // reached it before the client gave up.
  const values: string[] = [];
  for await (const r of setup.replay("hedge", { to: "end" }).records()) values.push(text(r.value));
  assert.deepEqual(values.filter((v) => v !== "unkeyed").sort(), ["before", "keyed fetch connect", "keyed node connect"]);
});
