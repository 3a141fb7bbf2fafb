// Builds the console into a directory (default dist): console.js and
// console.css bundled by esbuild, and index.html copied. The output is
// deterministic (minified, no source maps, no legal comments), so
// console_test.go can rebuild it and compare with what is checked in.
//
// The console imports the TypeScript client from ../sdk/ts/src. Its bare
// imports (@connectrpc/*, @bufbuild/*) resolve from this directory's
// node_modules, pinned by this package-lock.json, whatever sdk/ts holds.
//
// Usage: node build.mjs [outdir]
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, "dist"));
mkdirSync(out, { recursive: true });

const ownModules = {
  name: "own-node-modules",
  setup(build) {
    build.onResolve({ filter: /^@(connectrpc|bufbuild)\// }, async (args) => {
      if (args.pluginData === "own") return undefined;
      const r = await build.resolve(args.path, { kind: args.kind, resolveDir: here, pluginData: "own" });
      return r.errors.length ? { errors: r.errors } : { path: r.path, sideEffects: r.sideEffects };
    });
  },
};

await esbuild.build({
  entryPoints: { console: join(here, "src", "main.ts") },
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  legalComments: "none",
  charset: "utf8",
  outdir: out,
  plugins: [ownModules],
  logLevel: "warning",
});
await esbuild.build({
  entryPoints: { console: join(here, "src", "console.css") },
  bundle: true,
  minify: true,
  legalComments: "none",
  charset: "utf8",
  outdir: out,
  logLevel: "warning",
});
copyFileSync(join(here, "src", "index.html"), join(out, "index.html"));
