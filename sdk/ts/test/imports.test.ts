// The client's modules import each other without a cycle, type-only
// imports included: a cycle (client.ts and subscription.ts once imported
// each other) makes evaluation order matter and bundles fragile. What two
// modules share goes to a third both import (wire.ts).

import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const src = resolve(dirname(fileURLToPath(import.meta.url)), "..", "src");

/** imports maps each module of src (not src/gen) to the modules of src it imports or re-exports from. */
function imports(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const name of readdirSync(src).filter((n) => n.endsWith(".ts"))) {
    const text = readFileSync(resolve(src, name), "utf8");
    const deps = [...text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+"\.\/([\w-]+)\.js"/gms)].map((m) => m[1] + ".ts");
    graph.set(name, deps);
  }
  return graph;
}

test("src has no import cycle", () => {
  const graph = imports();
  assert.ok((graph.get("client.ts") ?? []).includes("subscription.ts"), "the parser found no import: fix it");
  const state = new Map<string, "open" | "done">();
  const visit = (m: string, path: string[]): void => {
    if (state.get(m) === "done") return;
    if (state.get(m) === "open") assert.fail(`import cycle: ${[...path.slice(path.indexOf(m)), m].join(" -> ")}`);
    state.set(m, "open");
    for (const d of graph.get(m) ?? []) visit(d, [...path, m]);
    state.set(m, "done");
  };
  for (const m of graph.keys()) visit(m, []);
});
