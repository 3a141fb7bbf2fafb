// Leader hints and a dead leader (as the Go client's TestHintToAPenalisedNodeIsNotFollowed):
// a refusal naming as leader a node this client could not reach a moment
// ago (a member whose raft has not yet noticed that its leader died) does
// not send the next attempt back to the dead node: it stays on the node
// that answered. In-memory transports (Connect's router transport) play
// the three nodes, so each call's node is known exactly.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { PublishService, PublishResponseSchema, PublishResultSchema } from "../src/gen/rewind/v1/publish_pb.js";
import { createClient } from "../src/index.js";

test("a hint naming a node the client just failed to reach is not followed", async () => {
  const calls: string[] = [];
  let refusals = 0;
  const node = (url: string) =>
    createRouterTransport(({ service }) => {
      service(PublishService, {
        publish() {
          calls.push(url);
          if (url === "http://a") throw new ConnectError("connection refused", Code.Unavailable); // dead
          if (url === "http://b" && refusals++ === 0) {
            // b still follows the dead a: it names a as the leader.
            throw new ConnectError("forward to node 1 failed", Code.Unavailable, { "Rewind-Leader": "1", "Rewind-Leader-Address": "a" });
          }
          return create(PublishResponseSchema, { results: [create(PublishResultSchema, { partition: 0, offset: 7n, messageId: "m" })] });
        },
      });
    });
  const client = createClient({ nodes: ["http://a", "http://b", "http://c"], transport: node, hedgeDelayMs: 0 });
  const [r] = await client.publish("t", { value: "x", idempotencyKey: "k" });
  assert.equal(r.offset, 7n);
  assert.deepEqual(calls, ["http://a", "http://b", "http://b"]);
});

test("a hedge that a member refuses ends the attempt instead of waiting for the silent node", { timeout: 30_000 }, async () => {
  const calls: string[] = [];
  const node = (url: string) =>
    createRouterTransport(({ service }) => {
      service(PublishService, {
        publish(_req, ctx) {
          calls.push(url);
          if (url === "http://a") {
            // Paused: it answers nothing until the client gives up on it.
            return new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(new ConnectError("aborted", Code.Canceled))));
          }
          if (url === "http://b") throw new ConnectError("no leader known for partition 0", Code.Unavailable); // an election
          return create(PublishResponseSchema, { results: [create(PublishResultSchema, { partition: 0, offset: 9n, messageId: "m" })] });
        },
      });
    });
  // An attempt deadline far beyond the test's timeout: waiting for a would fail it.
  const client = createClient({ nodes: ["http://a", "http://b", "http://c"], transport: node, hedgeDelayMs: 50, attemptTimeoutMs: 600_000 });
  const [r] = await client.publish("t", { value: "x", idempotencyKey: "k" });
  assert.equal(r.offset, 9n);
  assert.deepEqual(calls, ["http://a", "http://b", "http://c"]);
});
