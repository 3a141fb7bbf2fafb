// A new user's path: pack the package as the README says, install the
// tarball in an empty project, and run the README's five-line example,
// unchanged but for the server's address, against a real server. Then
// what other tools ask of an installed package: its package.json through
// the exports, and its types for TypeScript projects whose module
// resolution ignores exports (node10, through typesVersions).

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
  // npm pack runs prepack (tsc into dist/) and packs what "files" names.
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

  // Tools read the package's package.json by its name (exports allow it).
  const meta = `import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
console.log(require("@rewind-io/client/package.json").name);
const { default: pkg } = await import("@rewind-io/client/package.json", { with: { type: "json" } });
console.log(pkg.version);`;
  writeFileSync(join(app, "meta.mjs"), meta);
  const version = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")).version;
  assert.equal(execFileSync("node", ["meta.mjs"], { cwd: app, env, encoding: "utf8" }), `@rewind-io/client\n${version}\n`);

  // Every entry point type-checks under the old "node" (node10) resolution,
  // which reads typesVersions instead of exports, and under NodeNext.
  const check = `import { createClient, headerText, type RewindRecord } from "@rewind-io/client";
import { createClient as createNodeClient, type Auth } from "@rewind-io/client/node";
import { SubscribeService } from "@rewind-io/client/gen/subscribe_pb";
const auth: Auth = createNodeClient({ baseUrl: "http://127.0.0.1:1" }).auth;
const show = (r: RewindRecord): string => headerText(r, "source") ?? SubscribeService.typeName;
export const used = [createClient, auth, show];
`;
  writeFileSync(join(app, "check.ts"), check);
  const tsc = join(pkg, "node_modules", "typescript", "bin", "tsc");
  for (const [module, moduleResolution] of [["commonjs", "node10"], ["nodenext", "nodenext"]]) {
    const compilerOptions = { noEmit: true, strict: true, skipLibCheck: true, target: "es2022", lib: ["es2022", "dom"], types: [], module, moduleResolution };
    writeFileSync(join(app, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["check.ts"] }));
    try {
      execFileSync("node", [tsc, "-p", "tsconfig.json"], { cwd: app, env, encoding: "utf8", stdio: "pipe" });
    } catch (e) {
      assert.fail(`tsc --moduleResolution ${moduleResolution} of an app importing every entry point:\n${(e as { stdout?: string }).stdout}`);
    }
  }
});
