// Compiles every module in examples/ and hostile/ into build/<name>.wasm.
//
//   npm run build                 # rebuild what is out of date
//   npm run build -- --force      # rebuild everything
//   npm run build -- keyprefix    # only the named modules
//
// A module is rebuilt unless build/.manifest.json records that its .wasm
// (with the same SHA-256 as the file on disk) was built from the same
// inputs: its entry file, every .ts file under assembly/, its compiler
// flags, this script and package-lock.json (all hashed by content).
import asc from "assemblyscript/asc";
import { readdirSync, readFileSync, writeFileSync, renameSync, statSync, mkdirSync, existsSync } from "node:fs";
import { createHash } from "node:crypto";
import { join, basename, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
process.chdir(root);

// Options for real modules: small and fast, no GC (the SDK allocates nothing per record).
const EXAMPLE_FLAGS = ["--runtime", "stub", "-O3", "--noAssert", "--converge"];
// Hostile modules: same runtime; optimized too, but assertions kept.
const HOSTILE_FLAGS = ["--runtime", "stub", "-O2"];

const args = process.argv.slice(2);
const force = args.includes("--force");
const only = new Set(args.filter((a) => !a.startsWith("--")));

function tsFiles(dir) {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))
    .sort()
    .map((f) => join(dir, f));
}

function tsTree(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...tsTree(p));
    else if (e.name.endsWith(".ts")) out.push(p);
  }
  return out;
}

function sha256(...parts) {
  const h = createHash("sha256");
  for (const p of parts) h.update(p).update("\0");
  return h.digest("hex");
}

const shared = [...tsTree("assembly"), ...tsTree("hostile/lib"), "scripts/build.mjs", "package-lock.json"];
const sharedHash = sha256(...shared.flatMap((f) => [f, readFileSync(f)]));
const manifestPath = join("build", ".manifest.json");
let manifest = {};
try {
  manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
} catch {
  manifest = {};
}
function saveManifest() {
  writeFileSync(manifestPath + ".tmp", JSON.stringify(manifest, null, 2) + "\n");
  renameSync(manifestPath + ".tmp", manifestPath);
}

const targets = [
  ...tsFiles("examples").map((entry) => ({ entry, flags: EXAMPLE_FLAGS })),
  ...tsFiles("hostile").map((entry) => ({ entry, flags: HOSTILE_FLAGS })),
];

const seen = new Map();
for (const t of targets) {
  t.name = basename(t.entry, ".ts");
  if (seen.has(t.name)) {
    console.error(`build: ${t.entry} and ${seen.get(t.name)} would both build build/${t.name}.wasm`);
    process.exit(1);
  }
  seen.set(t.name, t.entry);
  t.out = join("build", `${t.name}.wasm`);
}
for (const name of only) {
  if (!seen.has(name)) {
    console.error(`build: no module named ${name}`);
    process.exit(1);
  }
}

mkdirSync("build", { recursive: true });
let failed = 0;
let built = 0;
let current = 0;
for (const t of targets) {
  if (only.size > 0 && !only.has(t.name)) continue;
  const input = sha256(sharedHash, t.entry, readFileSync(t.entry), t.flags.join(" "));
  const m = manifest[t.name];
  if (!force && m && m.input === input && existsSync(t.out) && m.output === sha256(readFileSync(t.out))) {
    current++;
    continue;
  }
  delete manifest[t.name];
  const { error, stderr } = await asc.main([t.entry, "--outFile", t.out, ...t.flags]);
  if (error) {
    console.error(`build: ${t.entry}: ${error.message}\n${stderr.toString()}`);
    failed++;
    continue;
  }
  manifest[t.name] = { input, output: sha256(readFileSync(t.out)) };
  saveManifest();
  built++;
  console.log(`built ${t.out} (${statSync(t.out).size} bytes)`);
}
for (const name of Object.keys(manifest)) if (!seen.has(name)) delete manifest[name];
saveManifest();
if (failed > 0) {
  console.error(`build: ${failed} module(s) failed`);
  process.exit(1);
}
console.log(`build: ${built} built, ${current} up to date`);
