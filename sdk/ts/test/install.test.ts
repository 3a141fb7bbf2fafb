// A new user's path: pack the package as the README says, install the
// tarball in an empty project, and run the README's five-line example,
// unchanged but for the server's address, against a real server.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Server } from "./server.js";
import { createClient } from "../src/node.js";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
let srv: Server;
let work: string;

before(async () => {
  srv = await Server.start();
  work = mkdtempSync(join(tmpdir(), "rewind-ts-app-"));
});
after(async () => {
  await srv?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** readmeExample returns the ```js block under the README's "## Five lines". */
function readmeExample(): string {
  const readme = readFileSync(join(pkg, "README.md"), "utf8");
  const m = /## Five lines\s+```js\n([\s\S]*?)```/.exec(readme);
  assert.ok(m, "README.md has a ```js block under ## Five lines");
  return m[1];
}

test("the README's example runs after npm install of the packed package", async () => {
  const example = readmeExample();
  assert.equal(example.trim().split("\n").length, 5, "five lines");
  const env = { ...process.env, npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false" };
  // npm pack runs prepare (tsc into dist/) and packs what "files" names.
  const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", work], { cwd: pkg, env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }));
  const tarball = join(work, packed[0].filename);
  const app = join(work, "app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  execFileSync("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball], { cwd: app, env, stdio: "pipe" });

  await createClient({ baseUrl: srv.url }).createTopic("orders");
  writeFileSync(join(app, "example.mjs"), example.replaceAll("http://127.0.0.1:7070", srv.url));
  const out = execFileSync("node", ["example.mjs"], { cwd: app, env, encoding: "utf8" });
  assert.equal(out, '0 order-1001 {"total":42}\n');
  // The other entry points resolve from the installed package too.
  const probe = `const [web, gen] = await Promise.all([import("@rewind-io/client"), import("@rewind-io/client/gen/subscribe_pb")]);
console.log(typeof web.createClient, gen.SubscribeService.typeName);`;
  writeFileSync(join(app, "probe.mjs"), probe);
  assert.equal(execFileSync("node", ["probe.mjs"], { cwd: app, env, encoding: "utf8" }), "function rewind.v1.SubscribeService\n");
});
