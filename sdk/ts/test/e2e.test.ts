// The client against a real `rewind serve` on loopback: every protocol of
// both entry points, every start and stop kind, errors with their details,
// the admin of topics and groups, and the event store (conditional
// appends, key and query reads, key subscriptions). (Resume after a
// restart and a node failure: resume.test.ts; filters and plugins:
// filter.test.ts.)

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Server } from "./server.js";
import { createClient as nodeClient, type Client } from "../src/node.js";
import {
  Code,
  ConditionError,
  PartialError,
  Position,
  RewindError,
  createClient as webClient,
  expectExists,
  expectNone,
  expectVersion,
  failIfMatched,
  forKey,
  formatPosition,
  recordTags,
  recordType,
  text,
  type PublishResult,
  type Query,
  type RewindRecord,
  type ReplayEvent,
  type SubscribeOptions,
} from "../src/index.js";

let srv: Server;
let client: Client;

// Attempts are bounded generously: a publish retried after a timeout on a
// busy machine could store a keyless record twice.
const opts = { attemptTimeoutMs: 60_000, streamOpenTimeoutMs: 60_000 };

before(async () => {
  srv = await Server.start();
  client = nodeClient({ baseUrl: srv.url, ...opts });
});
after(async () => {
  await srv?.close();
});

let topics = 0;
async function newTopic(partitions = 1): Promise<string> {
  const name = `t${++topics}`;
  await client.createTopic(name, { partitions });
  return name;
}

/** collect replays topic with o and returns every event (the stream must end). */
async function collect(c: Client, topic: string, o: SubscribeOptions): Promise<ReplayEvent[]> {
  const evs: ReplayEvent[] = [];
  for await (const ev of c.replay(topic, o)) evs.push(ev);
  return evs;
}

function recordsOf(evs: ReplayEvent[]): RewindRecord[] {
  return evs.flatMap((e) => (e.kind === "records" ? e.records : []));
}

async function replayValues(topic: string, o: SubscribeOptions): Promise<string[]> {
  return recordsOf(await collect(client, topic, { to: "end", ...o })).map((r) => text(r.value));
}

async function publishN(topic: string, n: number, prefix = "v"): Promise<PublishResult[]> {
  const out: PublishResult[] = [];
  // One request per record: distinct requests, increasing append times.
  for (let i = 0; i < n; i++) out.push(...(await client.publish(topic, { key: `k${i}`, value: `${prefix}${i}` })));
  return out;
}

describe("protocols", () => {
  const cases: [string, (url: string) => Client][] = [
    ["node connect", (url) => nodeClient({ baseUrl: url, ...opts })],
    ["node grpc", (url) => nodeClient({ baseUrl: url, transport: "grpc", ...opts })],
    ["node grpc-web", (url) => nodeClient({ baseUrl: url, transport: "grpc-web", ...opts })],
    ["fetch connect", (url) => webClient({ baseUrl: url, ...opts })],
    ["fetch grpc-web", (url) => webClient({ baseUrl: url, transport: "grpc-web", ...opts })],
  ];
  for (const [name, mk] of cases) {
    test(`${name}: publish, replay, admin and an error with details`, async () => {
      const c = mk(srv.url);
      const topic = `proto-${name.replace(/ /g, "-")}`;
      const t = await c.createTopic(topic, { partitions: 2 });
      assert.equal(t.config?.partitions, 2);
      const res = await c.publish(topic, [
        { key: "a", value: "1", headers: { h: "x" } },
        { key: "b", value: "2" },
        { key: "a", value: "3" },
      ]);
      assert.equal(res.length, 3);
      assert.equal(res[0].partition, res[2].partition, "the same key goes to the same partition");
      const evs = await collect(c, topic, { to: "end" });
      assert.equal(evs[0].kind, "started");
      assert.equal(evs.at(-1)!.kind, "end");
      const recs = recordsOf(evs).sort((x, y) => x.partition - y.partition || Number(x.offset - y.offset));
      const got = recs.map((r) => `${r.partition}/${r.offset}=${text(r.key)}:${text(r.value)}`).sort();
      const want = res
        .map((r, i) => `${r.partition}/${r.offset}=${["a", "b", "a"][i]}:${i + 1}`)
        .sort();
      assert.deepEqual(got, want);
      const a1 = recs.find((r) => text(r.value) === "1")!;
      assert.deepEqual(a1.headers.map((h) => [h.key, text(h.value)]), [["h", "x"]]);
      assert.equal(a1.messageId, res[0].messageId);
      assert.equal(a1.appendTimeUnixNanos, res[0].appendTimeUnixNanos);
      assert.ok((await c.listTopics()).some((x) => x.name === topic));
      await assert.rejects(
        collect(c, topic, { from: 99, partitions: [res[1].partition] }),
        (e: unknown) => {
          assert.ok(e instanceof RewindError, `${e}`);
          assert.equal(e.code, Code.OutOfRange);
          assert.equal(e.offsetRange?.partition, res[1].partition);
          assert.equal(e.offsetRange?.requestedOffset, 99n);
          assert.equal(e.offsetRange?.endOffset, 1n);
          return true;
        },
      );
    });
  }
});

describe("start positions", () => {
  let topic: string;
  let res: PublishResult[];
  before(async () => {
    topic = await newTopic(1);
    res = await publishN(topic, 10);
  });
  const all = Array.from({ length: 10 }, (_, i) => `v${i}`);

  test("earliest (and the default)", async () => {
    assert.deepEqual(await replayValues(topic, { from: "earliest" }), all);
    assert.deepEqual(await replayValues(topic, {}), all);
  });
  test("an offset", async () => {
    assert.deepEqual(await replayValues(topic, { from: "4" }), all.slice(4));
    assert.deepEqual(await replayValues(topic, { from: 7n }), all.slice(7));
  });
  test("records back", async () => {
    assert.deepEqual(await replayValues(topic, { from: "-3" }), all.slice(7));
    assert.deepEqual(await replayValues(topic, { from: "-100" }), all, "clamped to the log start");
  });
  test("a duration ago", async () => {
    // Everything was appended within the last day.
    assert.deepEqual(await replayValues(topic, { from: "-1d" }), all);
  });
  test("a time, exact to the nanosecond", async () => {
    for (const k of [0, 3, 9]) {
      const t = res[k].appendTimeUnixNanos;
      const want = res.filter((r) => r.appendTimeUnixNanos >= t).map((r) => `v${Number(r.offset)}`);
      const p = Position.unixNanos(t);
      assert.deepEqual(await replayValues(topic, { from: p }), want, `from ${formatPosition(p)}`);
      // The same through the CLI syntax.
      assert.deepEqual(await replayValues(topic, { from: formatPosition(p) }), want);
    }
  });
  test("a time after every record waits for new ones", async () => {
    const evs = await collect(client, topic, { from: "@9999-01-01T00:00:00Z", to: "end" });
    assert.deepEqual(recordsOf(evs), []);
  });
  test("a message ID", async () => {
    assert.deepEqual(await replayValues(topic, { from: `id:${res[5].messageId}` }), all.slice(5));
  });
  test("a resume token", async () => {
    const evs = await collect(client, topic, { to: 6 });
    assert.deepEqual(recordsOf(evs).map((r) => text(r.value)), all.slice(0, 6));
    const end = evs.at(-1)!;
    assert.equal(end.kind, "end");
    assert.ok(end.kind === "end" && end.resumeToken);
    assert.deepEqual(await replayValues(topic, { from: `token:${end.kind === "end" ? end.resumeToken : ""}` }), all.slice(6));
  });
  test("latest: only records appended after the start", async () => {
    const t = await newTopic(1);
    await publishN(t, 3, "old");
    const sub = client.replay(t, { from: "latest", to: 5 });
    const got: string[] = [];
    for await (const ev of sub) {
      if (ev.kind === "started") {
        assert.equal(ev.partitions[0].nextOffset, 3n);
        await publishN(t, 2, "new");
      }
      if (ev.kind === "records") got.push(...ev.records.map((r) => text(r.value)));
    }
    assert.deepEqual(got, ["new0", "new1"]);
  });
  test("records() yields the records alone", async () => {
    const vals: string[] = [];
    for await (const r of client.replay(topic, { from: 8, to: "end" }).records()) vals.push(text(r.value));
    assert.deepEqual(vals, all.slice(8));
  });
});

describe("stop positions", () => {
  let topic: string;
  let res: PublishResult[];
  before(async () => {
    topic = await newTopic(1);
    res = await publishN(topic, 6);
  });
  test("an offset, a message ID, a time", async () => {
    assert.deepEqual(await replayValues(topic, { to: 2 }), ["v0", "v1"]);
    assert.deepEqual(await replayValues(topic, { from: 1, to: `id:${res[4].messageId}` }), ["v1", "v2", "v3"]);
    const t = res[3].appendTimeUnixNanos;
    const want = res.filter((r) => r.appendTimeUnixNanos < t).map((r) => `v${Number(r.offset)}`);
    assert.deepEqual(await replayValues(topic, { to: Position.unixNanos(t) }), want);
  });
  test("end is fixed when the stream starts", async () => {
    const sub = client.replay(topic, { to: "end" });
    const got: string[] = [];
    for await (const ev of sub) {
      if (ev.kind === "started") await client.publish(topic, "later");
      if (ev.kind === "records") got.push(...ev.records.map((r) => text(r.value)));
    }
    assert.deepEqual(got, ["v0", "v1", "v2", "v3", "v4", "v5"]);
  });
});

describe("errors carry their details", () => {
  test("NotFound topic", async () => {
    await assert.rejects(collect(client, "no-such-topic", { to: "end" }), (e: RewindError) => e.code === Code.NotFound);
    await assert.rejects(client.publish("no-such-topic", "x"), (e: RewindError) => e.code === Code.NotFound);
    await assert.rejects(client.describeTopic("no-such-topic"), (e: RewindError) => e.code === Code.NotFound);
  });
  test("a bad position is InvalidArgument before anything is sent", async () => {
    const t = await newTopic();
    await assert.rejects(collect(client, t, { from: "yesterday" }), (e: RewindError) => {
      assert.ok(e instanceof RewindError);
      assert.equal(e.code, Code.InvalidArgument);
      assert.match(e.rawMessage, /want earliest, latest, end/);
      return true;
    });
    await assert.rejects(collect(client, t, { to: "earliest" }), (e: RewindError) => e.code === Code.InvalidArgument);
    await assert.rejects(collect(client, t, { from: "id:not-an-id", to: "end" }), (e: RewindError) => e.code === Code.InvalidArgument);
    await assert.rejects(collect(client, t, { from: "token:not-a-token", to: "end" }), (e: RewindError) => e.code === Code.InvalidArgument);
  });
  test("OutOfRange with OffsetRange", async () => {
    const t = await newTopic();
    await publishN(t, 2);
    await assert.rejects(collect(client, t, { from: 5 }), (e: RewindError) => {
      assert.equal(e.code, Code.OutOfRange);
      assert.equal(e.offsetRange?.requestedOffset, 5n);
      assert.equal(e.offsetRange?.logStartOffset, 0n);
      assert.equal(e.offsetRange?.endOffset, 2n);
      assert.ok(e.offsetRange?.earliestTime, "the append time of the first record");
      return true;
    });
  });
  test("RecordTooLarge", async () => {
    const t = `small-${++topics}`;
    await client.createTopic(t, { maxRecordBytes: 1024 });
    await assert.rejects(client.publish(t, ["ok", "x".repeat(4096)]), (e: RewindError) => {
      assert.equal(e.code, Code.InvalidArgument);
      assert.equal(e.recordTooLarge?.index, 1);
      assert.equal(e.recordTooLarge?.maxRecordBytes, 1024n);
      return true;
    });
    assert.deepEqual(await replayValues(t, {}), [], "nothing of a refused request is stored");
  });
  test("IdempotencyConflict, and duplicates answered with the original", async () => {
    const t = await newTopic(2);
    const [first] = await client.publish(t, { value: "one" }, { idempotencyKey: "order-1" });
    const [again] = await client.publish(t, { value: "one" }, { idempotencyKey: "order-1" });
    assert.equal(again.duplicate, true);
    assert.equal(again.offset, first.offset);
    assert.equal(again.messageId, first.messageId);
    await assert.rejects(client.publish(t, { value: "two" }, { idempotencyKey: "order-1" }), (e: RewindError) => {
      assert.equal(e.code, Code.FailedPrecondition);
      assert.equal(e.idempotencyConflict?.idempotencyKey, "order-1");
      assert.equal(e.idempotencyConflict?.messageId, first.messageId);
      return true;
    });
    // A batch key: record i gets key#i.
    const batch = await client.publish(t, ["a", "b"], { idempotencyKey: "batch-7" });
    const recs = recordsOf(await collect(client, t, { to: "end" }));
    assert.deepEqual(
      recs.filter((r) => r.idempotencyKey.startsWith("batch-7")).map((r) => [r.idempotencyKey, text(r.value)]).sort(),
      [["batch-7#0", "a"], ["batch-7#1", "b"]],
    );
    assert.equal(recs.length, 3);
    assert.equal(batch.length, 2);
  });
  test("generated idempotency keys", async () => {
    const t = await newTopic();
    const c = nodeClient({ baseUrl: srv.url, generateIdempotencyKeys: true, ...opts });
    await c.publish(t, ["a", { value: "b", idempotencyKey: "mine" }]);
    const keys = recordsOf(await collect(c, t, { to: "end" })).map((r) => r.idempotencyKey);
    assert.match(keys[0], /^gen-[A-Za-z0-9_-]{22}$/);
    assert.equal(keys[1], "mine");
  });
  test("an unknown partition fails the whole publish", async () => {
    const t = await newTopic(2);
    await assert.rejects(client.publish(t, ["a", { value: "b", partition: 7 }]), (e: RewindError) => e.code === Code.InvalidArgument);
    assert.deepEqual(await replayValues(t, {}), []);
    assert.ok(PartialError, "exported");
  });
  test("a cancelled stream", async () => {
    const t = await newTopic();
    await publishN(t, 1);
    const ctrl = new AbortController();
    await assert.rejects(
      (async () => {
        for await (const ev of client.replay(t, { signal: ctrl.signal })) {
          if (ev.kind === "caughtUp") ctrl.abort();
        }
      })(),
      (e: RewindError) => e.code === Code.Canceled,
    );
  });
});

describe("topics", () => {
  test("create, describe, alter, list, delete", async () => {
    const name = `admin-${++topics}`;
    const t = await client.createTopic(name, { partitions: 3, maxAge: "7d", maxRecords: 1000, dedupeWindow: "1h" });
    assert.equal(t.name, name);
    assert.equal(t.config?.partitions, 3);
    assert.equal(t.config?.retention?.maxAge?.seconds, 7n * 86400n);
    assert.equal(t.config?.retention?.maxRecords, 1000n);
    await assert.rejects(client.createTopic(name), (e: RewindError) => e.code === Code.AlreadyExists);
    await client.publish(name, [{ value: "x", partition: 2 }, { value: "y", partition: 2 }]);
    const d = await client.describeTopic(name);
    assert.deepEqual(d.partitions.map((p) => [p.partition, p.endOffset]), [[0, 0n], [1, 0n], [2, 2n]]);
    assert.ok(d.partitions[2].lastAppendTime);
    const altered = await client.alterTopic(name, { maxBytes: 1 << 20, cleanup: "compact,delete" });
    assert.equal(altered.config?.retention?.maxBytes, 1n << 20n);
    assert.equal(altered.config?.retention?.maxRecords, 0n);
    await client.deleteTopic(name);
    assert.ok(!(await client.listTopics()).some((x) => x.name === name));
  });
  test("cluster status", async () => {
    const s = await client.clusterStatus();
    assert.equal(s.nodes.length, 1);
  });
});

describe("groups", () => {
  test("members read their share, commit, and a reset re-reads", async () => {
    const topic = await newTopic(2);
    const group = `g${topics}`;
    await client.publish(topic, Array.from({ length: 6 }, (_, i) => ({ value: `r${i}`, partition: i % 2 })));

    // A member with autoCommit reads everything, then stops.
    const seen: string[] = [];
    const sub = client.subscribe(topic, { group, clientName: "ts-test", autoCommit: true });
    let generation = 0n;
    for await (const ev of sub) {
      if (ev.kind === "assigned") {
        assert.deepEqual(ev.partitions.map((p) => p.partition).sort(), [0, 1]);
        generation = ev.generation;
      }
      if (ev.kind === "records") seen.push(...ev.records.map((r) => text(r.value)));
      if (seen.length === 6) break;
    }
    assert.deepEqual(seen.sort(), ["r0", "r1", "r2", "r3", "r4", "r5"]);
    assert.equal(sub.generation, generation);
    assert.ok(sub.memberId);
    assert.equal(sub.commitError, undefined);

    // The commits of the stopped member are the group's.
    const [gt] = await client.describeGroup(group);
    assert.equal(gt.topic, topic);
    assert.deepEqual(gt.partitions.map((p) => [p.partition, p.committed, p.committedOffset]), [[0, true, 3n], [1, true, 3n]]);
    assert.ok((await client.listGroups()).some((g) => g.group === group && g.topic === topic));

    // A reset is a dry run unless told to execute, as in the CLI and the Go
    // client: it plans re-reading 2 records per partition and changes
    // nothing (the deprecated dryRun: true says the same).
    for (const opts of [undefined, { dryRun: true }, { execute: false }]) {
      const plan = await client.resetGroup(group, topic, "-2", opts);
      assert.equal(plan.executed, false, JSON.stringify(opts));
      assert.deepEqual(plan.plan.map((r) => [r.partition, r.currentOffset, r.newOffset, r.recordsToReread]), [[0, 3n, 1n, 2n], [1, 3n, 1n, 2n]]);
      assert.deepEqual((await client.describeGroup(group))[0].partitions.map((p) => p.committedOffset), [3n, 3n]);
    }
    await assert.rejects(client.resetGroup(group, topic, "-2", { execute: true, dryRun: true }), (e: RewindError) => e.code === Code.InvalidArgument);
    const done = await client.resetGroup(group, topic, "-2", { execute: true });
    assert.equal(done.executed, true);
    assert.deepEqual((await client.describeGroup(group))[0].partitions.map((p) => p.committedOffset), [1n, 1n]);

    // The next member re-reads from the reset, and commits by hand.
    const again: RewindRecord[] = [];
    const sub2 = client.subscribe(topic, { group });
    for await (const ev of sub2) {
      if (ev.kind === "records") again.push(...ev.records);
      if (again.length === 4) {
        await sub2.commitRecords(...again.filter((r) => r.partition === 0));
        break;
      }
    }
    assert.deepEqual(again.map((r) => text(r.value)).sort(), ["r2", "r3", "r4", "r5"]);
    // Partition 0 was committed by hand; partition 1 keeps the reset's offset.
    assert.deepEqual((await client.describeGroup(group))[0].partitions.map((p) => p.committedOffset), [3n, 1n]);
    // A commit with a generation from before the reset is fenced.
    await assert.rejects(client.commit(group, topic, generation, { 0: 1n }), (e: RewindError) => e.code === Code.FailedPrecondition);

    await assert.rejects(client.resetGroup("no-such-group", topic, "earliest"), (e: RewindError) => e.code === Code.NotFound);
    const planned = await client.resetGroup("new-group", topic, "latest", { create: true });
    assert.equal(planned.executed, false);
    assert.ok(!(await client.listGroups()).some((g) => g.group === "new-group"), "a dry run created the group");
    const created = await client.resetGroup("new-group", topic, "latest", { create: true, execute: true });
    assert.equal(created.executed, true);
    assert.deepEqual(created.plan.map((r) => r.newOffset), [3n, 3n]);
    assert.ok((await client.listGroups()).some((g) => g.group === "new-group"));
    await client.deleteGroup("new-group");
    assert.ok(!(await client.listGroups()).some((g) => g.group === "new-group"));
  });

  test("autoCommit commits what records() handed over, up to a break mid-event", async () => {
    const topic = await newTopic(1);
    const group = `g${topics}`;
    await client.publish(topic, ["a", "b", "c", "d", "e"]); // one request: one event, or a few
    const got: string[] = [];
    for await (const r of client.subscribe(topic, { group, autoCommit: true }).records()) {
      got.push(text(r.value));
      if (got.length === 2) break;
    }
    assert.deepEqual(got, ["a", "b"]);
    assert.deepEqual((await client.describeGroup(group))[0].partitions.map((p) => p.committedOffset), [2n]);
    // The next member goes on from there.
    const next: string[] = [];
    for await (const r of client.subscribe(topic, { group, autoCommit: { intervalMs: 60_000 } }).records()) {
      next.push(text(r.value));
      if (next.length === 3) break;
    }
    assert.deepEqual(next, ["c", "d", "e"]);
    assert.deepEqual((await client.describeGroup(group))[0].partitions.map((p) => p.committedOffset), [5n]);
  });

  test("an empty group name is refused", async () => {
    const t = await newTopic();
    await assert.rejects(collect(client, t, { group: "" }), (e: RewindError) => e.code === Code.InvalidArgument);
  });
});

describe("event store", () => {
  test("load, decide, append; a stale writer is refused with the versions", async () => {
    const topic = await newTopic(4);
    const acc = "account-1";
    const opened = await client.append(topic, acc, { value: "opened", type: "Opened", tags: ["branch:7"] }, expectNone());
    assert.equal(opened[0].keyVersion, 0n);
    for (let i = 0; i < 5; i++) {
      const loaded = await client.readKey(topic, acc);
      assert.equal(loaded.records.length, i + 1);
      assert.equal(loaded.head, BigInt(i));
      assert.deepEqual(loaded.records.map((r) => r.keyVersion), Array.from({ length: i + 1 }, (_, v) => BigInt(v)));
      const [r] = await client.append(topic, acc, [{ value: `deposit ${i}`, type: "Deposited" }], loaded.expect());
      assert.equal(r.keyVersion, BigInt(i + 1));
      assert.equal(r.partition, loaded.partition);
    }
    // A writer that loaded version 2 is refused, and nothing is stored.
    const stale = await client.append(topic, acc, "stale", expectVersion(2)).then(
      () => assert.fail("a stale append was accepted"),
      (e: unknown) => e,
    );
    assert.ok(stale instanceof ConditionError, `want a ConditionError, got ${String(stale)}`);
    assert.ok(stale instanceof RewindError);
    assert.equal(stale.code, Code.FailedPrecondition);
    assert.equal(stale.matched, false);
    assert.equal(text(stale.key!), acc);
    assert.equal(stale.expected, "version");
    assert.equal(stale.expectedVersion, 2n);
    assert.equal(stale.actualVersion, 5n);
    assert.equal(stale.summary, `key "${acc}": expected 2, actual 5`);
    assert.equal((await client.readKey(topic, acc)).head, 5n, "the refused append stored nothing");
    // A new entity that exists already; an existing one that does not.
    await assert.rejects(client.append(topic, acc, "again", expectNone()), (e: ConditionError) => e.expected === "none" && e.actualVersion === 5n);
    await assert.rejects(
      client.append(topic, "account-404", "x", expectExists()),
      (e: ConditionError) => e instanceof ConditionError && e.expected === "exists" && e.actualVersion === undefined,
    );
    // Type and tags are headers; the delivered records carry them, and key versions.
    const evs = recordsOf(await collect(client, topic, { to: "end" })).filter((r) => text(r.key) === acc);
    assert.deepEqual(evs.map((r) => r.keyVersion), [0n, 1n, 2n, 3n, 4n, 5n]);
    assert.equal(recordType(evs[0]), "Opened");
    assert.deepEqual(recordTags(evs[0]), ["branch:7"]);
    assert.equal(recordType(evs[1]), "Deposited");
    // A retry of an accepted append (the same idempotency key) is answered with the original.
    const first = await client.append(topic, acc, "withdraw", expectVersion(5), { idempotencyKey: "w-1" });
    const again = await client.append(topic, acc, "withdraw", expectVersion(5), { idempotencyKey: "w-1" });
    assert.equal(again[0].duplicate, true);
    assert.equal(again[0].offset, first[0].offset);
    assert.equal(again[0].keyVersion, 6n);
    // Keyed publishes get key versions too; keyless ones none.
    const [keyed, keyless] = await client.publish(topic, [{ key: acc, value: "plain", partition: first[0].partition }, { value: "no key" }]);
    assert.equal(keyed.keyVersion, 7n);
    assert.equal(keyless.keyVersion, undefined);
  });

  test("reads: from a version, the last N, backward, a limit", async () => {
    const topic = await newTopic(2);
    const key = "order-1";
    for (let i = 0; i < 6; i++) await client.append(topic, key, `step ${i}`, i === 0 ? expectNone() : expectVersion(i - 1));
    await client.publish(topic, { key: "order-2", value: "other" });
    const vals = (r: { records: RewindRecord[] }) => r.records.map((x) => `${x.keyVersion}:${text(x.value)}`);
    const all = await client.readKey(topic, key);
    assert.deepEqual(vals(all), ["0:step 0", "1:step 1", "2:step 2", "3:step 3", "4:step 4", "5:step 5"]);
    assert.equal(all.head, 5n);
    assert.equal(all.earliest, 0n);
    assert.equal(all.more, false);
    assert.ok(all.position !== undefined && all.position >= all.records[5].offset);
    assert.deepEqual(vals(await client.readKey(topic, key, { fromVersion: 4 })), ["4:step 4", "5:step 5"]);
    assert.deepEqual(vals(await client.readKey(topic, key, { last: 2 })), ["4:step 4", "5:step 5"]);
    assert.deepEqual(vals(await client.readKey(topic, key, { last: 1, backward: true })), ["5:step 5"]);
    assert.deepEqual(vals(await client.readKey(topic, key, { fromVersion: 2, backward: true })), ["2:step 2", "1:step 1", "0:step 0"]);
    const page = await client.readKey(topic, key, { backward: true, limit: 3 });
    assert.deepEqual(vals(page), ["5:step 5", "4:step 4", "3:step 3"]);
    assert.equal(page.more, true);
    const fromOffset = await client.readKey(topic, key, { fromOffset: all.records[3].offset });
    assert.deepEqual(vals(fromOffset), ["3:step 3", "4:step 4", "5:step 5"]);
    // A time (a Date: millisecond precision) starts at the first record
    // appended at or after it.
    const t = all.records[3].appendTime;
    const fromTime = await client.readKey(topic, key, { fromTime: t });
    assert.deepEqual(vals(fromTime), vals({ records: all.records.filter((r) => r.appendTimeUnixNanos >= BigInt(t.getTime()) * 1_000_000n) }));
    const none = await client.readKey(topic, "order-404");
    assert.equal(none.head, undefined);
    assert.deepEqual(none.records, []);
    assert.deepEqual(none.expect(), expectNone());
    await assert.rejects(client.readKey(topic, key, { fromVersion: 1, last: 2 }), (e: RewindError) => e.code === Code.InvalidArgument);
  });

  test("a key subscription, from a key version", async () => {
    const topic = await newTopic(3);
    const key = "cart-9";
    for (let i = 0; i < 4; i++) {
      await client.append(topic, key, `c${i}`);
      await client.publish(topic, { key: `noise-${i}`, value: "n" });
    }
    const got = async (o: SubscribeOptions) => recordsOf(await collect(client, topic, { to: "end", key, ...o })).map((r) => `${r.keyVersion}:${text(r.value)}`);
    assert.deepEqual(await got({}), ["0:c0", "1:c1", "2:c2", "3:c3"]);
    assert.deepEqual(await got({ from: { keyVersion: 2 } }), ["2:c2", "3:c3"]);
    await assert.rejects(collect(client, topic, { from: { keyVersion: 1 }, to: "end" }), (e: RewindError) => e.code === Code.InvalidArgument);
  });

  test("one partition, several keys: forKey, and a cross-partition append is refused", async () => {
    const single = await newTopic(1);
    await client.append(single, "a", "a0");
    await client.append(single, "b", "b0");
    // Move from a to b atomically, only if neither changed.
    const res = await client.append(single, "a", [{ value: "a1" }, { key: "b", value: "b1" }], expectVersion(0), forKey("b", expectVersion(0)));
    assert.deepEqual(res.map((r) => r.keyVersion), [1n, 1n]);
    await assert.rejects(
      client.append(single, "a", "a2", expectVersion(1), forKey("b", expectVersion(0))),
      (e: ConditionError) => text(e.key!) === "b" && e.expectedVersion === 0n && e.actualVersion === 1n,
    );
    const two = await newTopic(2);
    await assert.rejects(
      client.append(two, "k", [{ value: "x", partition: 0 }, { value: "y", partition: 1 }]),
      (e: RewindError) => e.code === Code.InvalidArgument,
    );
  });

  test("a query and failIfMatched: of racing writers exactly one wins", async () => {
    const topic = await newTopic(1);
    await client.publish(topic, { value: "c42 created", type: "CourseCreated", tags: ["course:42"] });
    const q: Query = { types: ["SeatBooked"], tags: ["course:42"] };
    // Every writer reads first, then they all append: each decided on the same position.
    const writers = 8;
    const reads = await Promise.all(Array.from({ length: writers }, () => client.query(topic, q)));
    for (const r of reads) assert.equal(r.records.length, 0);
    const outcomes = await Promise.allSettled(
      reads.map((read, w) =>
        client.append(topic, `student-${w}`, { value: "booked", type: "SeatBooked", tags: ["course:42", `student:${w}`] }, failIfMatched(q, read.position)),
      ),
    );
    const won = outcomes.filter((o) => o.status === "fulfilled");
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
    assert.equal(won.length, 1, `${won.length} bookings won: ${refused.map((o) => String(o.reason)).join("; ")}`);
    for (const o of refused) {
      assert.ok(o.reason instanceof ConditionError, String(o.reason));
      assert.equal(o.reason.matched, true);
      assert.equal(o.reason.matchedOffset, won[0].status === "fulfilled" ? won[0].value[0].offset : -1n);
      assert.deepEqual(o.reason.query, [{ types: ["SeatBooked"], tags: ["course:42"] }]);
    }
    const booked = await client.query(topic, q);
    assert.equal(booked.records.length, 1);
    assert.equal(recordType(booked.records[0]), "SeatBooked");
    // A query item matches any of its types; items are alternatives.
    const any = await client.query(topic, [{ types: ["CourseCreated", "SeatBooked"] }]);
    assert.equal(any.records.length, 2);
    // Without a position, no matching record may exist at all.
    await assert.rejects(client.append(topic, "late", "x", failIfMatched(q)), (e: ConditionError) => e.matched);
    await client.append(topic, "other", "y", failIfMatched({ tags: ["course:43"] }));
  });

  test("a refusal through fetch and gRPC-web keeps its detail", async () => {
    const topic = await newTopic(1);
    const web = webClient({ baseUrl: srv.url, transport: "grpc-web", ...opts });
    await web.append(topic, "k", "v0", expectNone());
    await assert.rejects(web.append(topic, "k", "v1", expectNone()), (e: ConditionError) => e instanceof ConditionError && e.actualVersion === 0n);
    assert.equal((await web.readKey(topic, "k")).head, 0n);
  });
});
