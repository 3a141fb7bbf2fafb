// Streams that go on: a live replay whose server is killed and restarted
// resumes from its token, with no record skipped or delivered twice; a
// replay through the nodes of a cluster moves to another node when its own
// dies; a client given a dead node first uses the next.

import { after, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { Server, freePort } from "./server.js";
import { createClient as nodeClient, type Client } from "../src/node.js";
import { Code, ReconnectError, RewindError, createClient as webClient, text, type ReplayEvent } from "../src/index.js";

const servers: Server[] = [];
after(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

const opts = { attemptTimeoutMs: 60_000, streamOpenTimeoutMs: 60_000, retryWindowMs: 120_000 };

/**
 * follow reads a live replay of topic through c until it has want values,
 * calling onValue after each records event; it returns the values and the
 * kinds of the events seen.
 */
async function follow(
  c: Client,
  topic: string,
  want: number,
  onValues: (n: number) => Promise<void>,
): Promise<{ values: string[]; kinds: string[]; resumes: number }> {
  const values: string[] = [];
  const kinds: string[] = [];
  const sub = c.replay(topic, { reconnectWindowMs: 120_000, progressIntervalMs: 200 });
  for await (const ev of sub) {
    kinds.push(ev.kind);
    if (ev.kind === "records") {
      values.push(...ev.records.map((r) => text(r.value)));
      await onValues(values.length);
    }
    if (values.length >= want) break;
  }
  return { values, kinds, resumes: sub.resumes };
}

for (const [name, mk] of [
  ["node connect", (url: string) => nodeClient({ baseUrl: url, ...opts })],
  ["node grpc", (url: string) => nodeClient({ baseUrl: url, transport: "grpc", ...opts })],
  ["fetch connect", (url: string) => webClient({ baseUrl: url, ...opts })],
] as const) {
  test(`${name}: a live replay resumes after its server is killed and restarted`, async () => {
    const srv = await Server.start();
    servers.push(srv);
    const c = mk(srv.url);
    await c.createTopic("live", { partitions: 2 });
    await c.publish("live", ["v0", "v1", "v2"].map((value, i) => ({ value, partition: i % 2 })));
    let restarted = false;
    const got = await follow(c, "live", 6, async (n) => {
      if (n === 3 && !restarted) {
        restarted = true;
        await srv.kill(); // SIGKILL: what was acknowledged is on disk
        await srv.restart();
        await c.publish("live", ["v3", "v4", "v5"].map((value, i) => ({ value, partition: i % 2 })));
      }
    });
    assert.deepEqual(got.values.sort(), ["v0", "v1", "v2", "v3", "v4", "v5"], "no record skipped or delivered twice");
    assert.equal(got.resumes, 1);
    const i = got.kinds.indexOf("disconnected");
    assert.ok(i > 0, `a disconnected event: ${got.kinds.join(" ")}`);
    assert.equal(got.kinds.filter((k) => k === "started").length, 1, "the new stream's started event is not delivered");
    assert.ok(got.kinds.indexOf("reconnected") > i, `then a reconnected event: ${got.kinds.join(" ")}`);
  });
}

test("a group member goes on after its server is killed and restarted, delivering nothing twice", async () => {
  const srv = await Server.start();
  servers.push(srv);
  const c = nodeClient({ baseUrl: srv.url, ...opts });
  await c.createTopic("grp", { partitions: 2 });
  await c.publish("grp", ["v0", "v1", "v2", "v3"].map((value, i) => ({ value, partition: i % 2 })));
  const values: string[] = [];
  const kinds: string[] = [];
  let restarted = false;
  // No commits: after the restart the group has none, so the member is
  // given its partitions from the start again and must skip what it
  // delivered before.
  const sub = c.subscribe("grp", { group: "workers", reconnectWindowMs: 120_000 });
  for await (const ev of sub) {
    kinds.push(ev.kind);
    if (ev.kind === "records") values.push(...ev.records.map((r) => text(r.value)));
    if (values.length === 4 && !restarted) {
      restarted = true;
      await srv.kill();
      await srv.restart();
      await c.publish("grp", ["v4", "v5"].map((value, i) => ({ value, partition: i % 2 })));
    }
    if (values.length >= 6) break;
  }
  assert.deepEqual(values.sort(), ["v0", "v1", "v2", "v3", "v4", "v5"]);
  assert.equal(sub.resumes, 1);
  assert.ok(kinds.indexOf("reconnected") > kinds.indexOf("disconnected"), kinds.join(" "));
  assert.ok(kinds.filter((k) => k === "assigned").length >= 2, `assigned again after the rejoin: ${kinds.join(" ")}`);
});

test("a stream whose server is gone for good ends with a ReconnectError after its window", async () => {
  const srv = await Server.start();
  servers.push(srv);
  const c = nodeClient({ baseUrl: srv.url, ...opts });
  await c.createTopic("gone");
  await c.publish("gone", "x");
  const kinds: ReplayEvent["kind"][] = [];
  await assert.rejects(
    (async () => {
      for await (const ev of c.replay("gone", { reconnectWindowMs: 1000 })) {
        kinds.push(ev.kind);
        if (ev.kind === "records") await srv.kill();
      }
    })(),
    (e: Error) => {
      assert.ok(e instanceof ReconnectError, String(e));
      assert.match(e.message, /could not go on within 1000 ms/);
      return true;
    },
  );
  assert.ok(kinds.includes("disconnected"));
});

test("a client given a dead node first uses the next", async () => {
  const srv = await Server.start();
  servers.push(srv);
  const dead = `http://127.0.0.1:${await freePort()}`;
  const c = nodeClient({ nodes: [dead, srv.url], ...opts });
  await c.createTopic("two");
  await c.publish("two", ["a", "b"]);
  const vals: string[] = [];
  for await (const r of c.replay("two", { to: "end" }).records()) vals.push(text(r.value));
  assert.deepEqual(vals, ["a", "b"]);
  // A fresh client opens its stream on the dead node first, then moves on.
  const c2 = webClient({ nodes: `${dead},${srv.url}`, ...opts });
  const vals2: string[] = [];
  for await (const r of c2.replay("two", { to: "end" }).records()) vals2.push(text(r.value));
  assert.deepEqual(vals2, ["a", "b"]);
});

test("a replay through a cluster goes on through another node when its node dies", async () => {
  const ports = await Promise.all([freePort(), freePort(), freePort()]);
  const initial = ports.map((p, i) => `${i + 1}=127.0.0.1:${p}`).join(",");
  const nodes = await Promise.all(
    ports.map((port, i) => Server.start({ port, extra: ["--node-id", String(i + 1), "--initial-cluster", initial] })),
  );
  servers.push(...nodes);
  const urls = nodes.map((n) => n.url);
  const c = nodeClient({ nodes: urls, ...opts });
  // A fresh cluster may still be electing its metadata leader: a create
  // whose outcome is unknown is checked, then sent again.
  for (const deadline = Date.now() + 120_000; ; ) {
    const err = await c.createTopic("ha", { partitions: 2, replicationFactor: 3 }).then(
      () => undefined,
      (e: RewindError) => e,
    );
    if (!err || err.code === Code.AlreadyExists) break;
    if (err.code !== Code.Unavailable || Date.now() > deadline) throw err;
    await new Promise((r) => setTimeout(r, 200));
  }
  await c.publish("ha", Array.from({ length: 4 }, (_, i) => ({ value: `v${i}`, partition: i % 2 })));
  const others = nodeClient({ nodes: urls.slice(1), ...opts });
  let killed = false;
  const got = await follow(c, "ha", 8, async (n) => {
    if (n === 4 && !killed) {
      killed = true;
      await nodes[0].kill(); // the node the stream is on (the client's first)
      await others.publish("ha", Array.from({ length: 4 }, (_, i) => ({ value: `v${i + 4}`, partition: i % 2 })));
    }
  });
  assert.deepEqual(got.values.sort(), ["v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7"]);
  assert.equal(got.resumes, 1);
  // Cluster admin through the client: three members, and a balanced
  // cluster plans no move.
  const status = await others.clusterStatus();
  assert.deepEqual(status.nodes.map((n) => n.id).sort(), [1n, 2n, 3n]);
  assert.deepEqual(await others.rebalance({ dryRun: true }), []);
  assert.ok(got.kinds.includes("disconnected") && got.kinds.includes("reconnected"), got.kinds.join(" "));
});

test("calls to nodes that refuse connections fail with Unavailable; a create that certainly did nothing is not outcomeUnknown", async () => {
  const dead = [`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`];
  for (const c of [nodeClient({ nodes: dead, retryWindowMs: 300 }), webClient({ nodes: dead, retryWindowMs: 300 })]) {
    await assert.rejects(c.listTopics(), (e: unknown) => {
      assert.ok(e instanceof RewindError, String(e));
      assert.equal(e.code, Code.Unavailable, `code ${Code[e.code]}: ${e.message}`);
      return true;
    });
    await assert.rejects(c.createTopic("t"), (e: RewindError) => {
      assert.equal(e.outcomeUnknown, false, e.message);
      return true;
    });
  }
});

test("a node that accepts connections but never answers is cut off by the attempt and open deadlines", async () => {
  // A TCP server that accepts and then says nothing: a paused node.
  const held: import("node:net").Socket[] = [];
  const hung = createServer((sock) => held.push(sock));
  await new Promise<void>((r) => hung.listen(0, "127.0.0.1", r));
  const addr = hung.address() as import("node:net").AddressInfo;
  try {
    for (const c of [
      nodeClient({ baseUrl: `127.0.0.1:${addr.port}`, attemptTimeoutMs: 300, attempts: 2, retryWindowMs: 0, streamOpenTimeoutMs: 300 }),
      webClient({ baseUrl: `127.0.0.1:${addr.port}`, attemptTimeoutMs: 300, attempts: 2, retryWindowMs: 0, streamOpenTimeoutMs: 300 }),
    ]) {
      await assert.rejects(c.listTopics(), (e: RewindError) => {
        assert.equal(e.code, Code.DeadlineExceeded, e.message);
        assert.match(e.message, /no answer from http:\/\/127\.0\.0\.1:\d+ within 300 ms/);
        return true;
      });
      await assert.rejects(
        (async () => {
          for await (const ev of c.replay("t")) void ev;
        })(),
        (e: RewindError) => {
          assert.equal(e.code, Code.DeadlineExceeded, e.message);
          assert.match(e.message, /no first event from .* within 300 ms/);
          return true;
        },
      );
    }
  } finally {
    for (const s of held) s.destroy();
    await new Promise((r) => hung.close(r));
  }
});
