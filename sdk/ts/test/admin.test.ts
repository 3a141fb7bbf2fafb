// client.auth against a real server with --auth: users and their tokens,
// ACL rules and what they allow, quotas; and the same calls refused on a
// server without --auth.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Code, RewindError } from "../src/index.js";
import { createClient } from "../src/node.js";
import { Server } from "./server.js";

const code = (c: Code) => (e: unknown) => e instanceof RewindError && e.code === c;

test("users, ACLs and quotas on a server with --auth", async (t) => {
  const srv = await Server.start({ extra: ["--auth"] });
  t.after(() => srv.close());
  const admin = createClient({ baseUrl: srv.url, token: readFileSync(join(srv.dataDir, "bootstrap-token"), "utf8").trim() });
  await admin.createTopic("orders");
  await admin.createTopic("secrets");

  // A user: its token opens the server, and it may do nothing yet.
  const { token, user } = await admin.auth.createUser("etl", { expiresIn: "1h" });
  assert.equal(user.principal, "etl");
  assert.ok(token !== "" && user.expireTime !== undefined);
  const users = await admin.auth.listUsers();
  assert.ok(users.some((u) => u.tokenId === user.tokenId && u.principal === "etl" && !u.superuser));
  const etl = createClient({ baseUrl: srv.url, token, attempts: 1 });
  await assert.rejects(etl.describeTopic("orders"), code(Code.PermissionDenied));

  // A rule lets it describe and publish to orders, and nothing else.
  const rule = await admin.auth.grantAcl({ principal: "etl", kind: "topic", pattern: "orders", operations: ["describe", "publish"] });
  assert.ok(rule.id > 0n);
  assert.deepEqual([rule.principal, rule.kind, rule.pattern, [...rule.operations].sort(), rule.deny], ["etl", "topic", "orders", ["describe", "publish"], false]);
  assert.equal((await etl.describeTopic("orders")).topic.name, "orders");
  await etl.publish("orders", ["from etl"]);
  await assert.rejects(etl.describeTopic("secrets"), code(Code.PermissionDenied));
  const { rules, superusers } = await admin.auth.listAcls("etl");
  assert.ok(rules.some((r) => r.id === rule.id));
  assert.ok(superusers.length > 0);
  const yes = await admin.auth.checkAcl("etl", "describe", "topic:orders");
  assert.equal(yes.allowed, true);
  assert.equal(yes.rule?.id, rule.id);
  const no = await admin.auth.checkAcl("etl", "describe", "topic:secrets");
  assert.equal(no.allowed, false);
  assert.ok(no.explanation !== "");

  // Taking publish off by match keeps describe; revoking by id removes the rest.
  const before = await admin.auth.revokeAcl({ principal: "etl", kind: "topic", pattern: "orders", operations: ["publish"] });
  assert.equal(before.length, 1);
  await assert.rejects(etl.publish("orders", ["again"]), code(Code.PermissionDenied));
  assert.equal((await etl.describeTopic("orders")).topic.name, "orders");
  const [left] = (await admin.auth.listAcls("etl")).rules.filter((r) => r.principal === "etl");
  await admin.auth.revokeAcl(left.id);
  await assert.rejects(etl.describeTopic("orders"), code(Code.PermissionDenied));
  await assert.rejects(admin.auth.revokeAcl(left.id), code(Code.NotFound));

  // Quotas: a principal's, the default, and their removal.
  await admin.auth.setQuota("etl", { publishBytesPerSec: 10n << 20n, streams: 4, topics: 2, partitions: 8 });
  await admin.auth.setQuota(null, { replayBytesPerSec: 50 << 20 });
  let q = await admin.auth.listQuotas();
  assert.deepEqual(
    [q.quotas["etl"]?.publishBytesPerSec, q.quotas["etl"]?.streams, q.quotas["etl"]?.topics, q.quotas["etl"]?.partitions],
    [10n << 20n, 4, 2, 8],
  );
  assert.equal(q.defaultQuota?.replayBytesPerSec, 50n << 20n);
  await admin.auth.setQuota("etl", {});
  q = await admin.auth.listQuotas();
  assert.equal(q.quotas["etl"], undefined, "an empty quota removes it");
  await assert.rejects(admin.auth.setQuota("etl", { streams: -1 }), code(Code.InvalidArgument));
  await assert.rejects(admin.auth.setQuota("", { streams: 1 }), code(Code.InvalidArgument));

  // Revoking the user ends its token.
  const revoked = await admin.auth.revokeUser("etl");
  assert.deepEqual(revoked.map((u) => u.tokenId), [user.tokenId]);
  await assert.rejects(etl.listTopics(), code(Code.Unauthenticated));
  await assert.rejects(admin.auth.revokeUser("etl"), code(Code.NotFound));

  // Only an admin may manage them.
  const other = await admin.auth.createUser("reader");
  const reader = createClient({ baseUrl: srv.url, token: other.token, attempts: 1 });
  await assert.rejects(reader.auth.listUsers(), code(Code.PermissionDenied));
});

test("without --auth the calls are FailedPrecondition", async (t) => {
  const srv = await Server.start();
  t.after(() => srv.close());
  const c = createClient({ baseUrl: srv.url, attempts: 1 });
  await assert.rejects(c.auth.listUsers(), code(Code.FailedPrecondition));
  await assert.rejects(c.auth.createUser("x"), code(Code.FailedPrecondition));
});
