// A server with --auth: the client sends its token on every call; without
// one, or with a bad one, calls fail with Unauthenticated.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Code, RewindError } from "../src/index.js";
import { createClient } from "../src/node.js";
import { Server } from "./server.js";

test("a token opens a server with --auth", async (t) => {
  const srv = await Server.start({ extra: ["--auth"] });
  t.after(() => srv.close());
  const token = readFileSync(join(srv.dataDir, "bootstrap-token"), "utf8").trim();
  for (const transport of ["connect", "grpc", "grpc-web"] as const) {
    const c = createClient({ baseUrl: srv.url, transport, token });
    await c.createTopic("t-" + transport, { partitions: 1 });
    await c.publish("t-" + transport, ["a", "b"]);
    let n = 0;
    for await (const ev of c.replay("t-" + transport, { from: "earliest", to: "end" })) if (ev.kind === "records") n += ev.records.length;
    assert.equal(n, 2, transport);
  }
  for (const token of [undefined, "rwd_garbage"]) {
    const c = createClient({ baseUrl: srv.url, token, attempts: 1 });
    await assert.rejects(c.listTopics(), (e: unknown) => e instanceof RewindError && e.code === Code.Unauthenticated, `token ${token}`);
  }
});
