// Filters and plugin admin against a real server, with the keyprefix
// example filter built from source (sdk/guest/examples/go/keyprefix).

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Server, keyprefixModule } from "./server.js";
import { createClient, type Client } from "../src/node.js";
import { Code, CompileState, FilterFailure, RewindError, text, type ReplayEvent } from "../src/index.js";

let srv: Server;
let client: Client;
let wasm: Uint8Array;

before(async () => {
  wasm = keyprefixModule();
  srv = await Server.start();
  client = createClient({ baseUrl: srv.url, attemptTimeoutMs: 120_000, streamOpenTimeoutMs: 120_000 });
  await client.createTopic("users", { partitions: 2 });
  await client.publish(
    "users",
    ["user-1/a", "user-2/a", "user-1/b", "admin/x", "user-1/c"].map((k) => ({ key: k, value: `v:${k}` })),
  );
});
after(async () => {
  await srv?.close();
});

async function filtered(o: Parameters<Client["replay"]>[1]): Promise<{ keys: string[]; evs: ReplayEvent[] }> {
  const evs: ReplayEvent[] = [];
  for await (const ev of client.replay("users", { to: "end", ...o })) evs.push(ev);
  const keys = evs.flatMap((e) => (e.kind === "records" ? e.records.map((r) => text(r.key)) : [])).sort();
  return { keys, evs };
}

test("upload, list, get and delete a plugin", async () => {
  const up = await client.uploadPlugin("keyprefix", wasm, { description: "keeps keys with a prefix" });
  assert.equal(up.plugin.name, "keyprefix");
  assert.equal(up.plugin.version, 1);
  assert.equal(up.unchanged, false);
  assert.match(up.plugin.module, /^sha256:[0-9a-f]{64}$/);
  const again = await client.uploadPlugin("keyprefix", wasm);
  assert.equal(again.unchanged, true);
  assert.equal(again.plugin.version, 1);
  const list = await client.listPlugins();
  assert.deepEqual(list.map((p) => [p.name, p.version]), [["keyprefix", 1]]);
  const got = await client.getPlugin("keyprefix@1", { includeModule: true });
  assert.equal(got.plugin.description, "keeps keys with a prefix");
  assert.ok(Buffer.from(got.module).equals(Buffer.from(wasm)));
  assert.ok([CompileState.COMPILED, CompileState.COMPILING, CompileState.NOT_COMPILED].includes(got.plugin.compileState));
  await assert.rejects(client.getPlugin("nope"), (e: RewindError) => e.code === Code.NotFound);

  await client.uploadPlugin("doomed", wasm);
  const deleted = await client.deletePlugin("doomed");
  assert.deepEqual(deleted.map((p) => p.name), ["doomed"]);
  assert.deepEqual((await client.listPlugins()).map((p) => p.name), ["keyprefix"]);
});

test("a replay through a registered plugin and through an inline module", async () => {
  await client.uploadPlugin("keyprefix", wasm);
  const byName = await filtered({ filter: { plugin: "keyprefix", config: '{"prefix":"user-1"}' } });
  assert.deepEqual(byName.keys, ["user-1/a", "user-1/b", "user-1/c"]);
  const rec = byName.evs.find((e) => e.kind === "records");
  assert.ok(rec && rec.kind === "records" && /^sha256:/.test(rec.filterModule));
  const inline = await filtered({ filter: { module: wasm, config: '{"prefix":"admin"}' } });
  assert.deepEqual(inline.keys, ["admin/x"]);
});

test("a filter that refuses its config ends the stream with a FilterError", async () => {
  await client.uploadPlugin("keyprefix", wasm);
  await assert.rejects(filtered({ filter: { plugin: "keyprefix", config: '{"prefix":5}' } }), (e: unknown) => {
    assert.ok(e instanceof RewindError, String(e));
    assert.ok(e.filterError, `a FilterError detail: ${e.message}`);
    assert.equal(e.filterError.failure, FilterFailure.CONFIG);
    assert.match(e.filterError.module, /^sha256:/);
    return true;
  });
  await assert.rejects(filtered({ filter: { module: new TextEncoder().encode("not wasm") } }), (e: RewindError) => {
    assert.equal(e.code, Code.InvalidArgument);
    return true;
  });
});

test("test a plugin on given records and on a range of the topic", async () => {
  await client.uploadPlugin("keyprefix", wasm);
  const onRecords = await client.testPlugin(
    { plugin: "keyprefix", config: '{"prefix":"a"}' },
    { records: [{ key: "ab", value: "1" }, { key: "ba", value: "2" }] },
  );
  assert.equal(onRecords.scanned, 2n);
  assert.equal(onRecords.kept, 1n);
  assert.deepEqual(onRecords.results.map((r) => r.outputs.length), [1, 0]);
  const onTopic = await client.testPlugin(
    { plugin: "keyprefix", config: '{"prefix":"user-2"}' },
    { topic: "users", from: "earliest", limit: 10 },
  );
  assert.equal(onTopic.scanned, 5n);
  assert.equal(onTopic.kept, 1n);
  const failing = await client.testPlugin({ plugin: "keyprefix", config: '{"prefix":5}' }, { records: [{ key: "x" }] });
  assert.equal(failing.error?.failure, FilterFailure.CONFIG);
});
