// Real servers for the tests: `rewind serve` built from this repository
// (or REWIND_BIN, which the Go test that runs this suite sets), on a free
// loopback port, with its data in a temporary directory. No mocks.

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, closeSync, readFileSync, rmSync, existsSync, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

let bin: string | undefined;

/** rewindBin is the rewind binary: REWIND_BIN, or built once per process with go build. */
export function rewindBin(): string {
  if (bin) return bin;
  if (process.env.REWIND_BIN) return (bin = process.env.REWIND_BIN);
  const dir = join(tmpdir(), `rewind-ts-bin-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const out = join(dir, "rewind");
  execFileSync("go", ["build", "-o", out, "./cmd/rewind"], { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"] });
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return (bin = out);
}

let wasm: Uint8Array | undefined;

/** keyprefixModule is the keyprefix example filter (sdk/guest/examples/go/keyprefix), built with go (REWIND_KEYPREFIX_WASM if set). */
export function keyprefixModule(): Uint8Array {
  if (wasm) return wasm;
  if (process.env.REWIND_KEYPREFIX_WASM) return (wasm = readFileSync(process.env.REWIND_KEYPREFIX_WASM));
  const dir = mkdtempSync(join(tmpdir(), "rewind-ts-wasm-"));
  const out = join(dir, "keyprefix.wasm");
  try {
    execFileSync("go", ["build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-o", out, "."], {
      cwd: join(repoRoot, "sdk", "guest", "examples", "go", "keyprefix"),
      env: { ...process.env, GOOS: "wasip1", GOARCH: "wasm", CGO_ENABLED: "0" },
      stdio: ["ignore", "inherit", "inherit"],
    });
    return (wasm = readFileSync(out));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** freePort returns a loopback port nobody listens on now. */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => (typeof a === "object" && a ? res(a.port) : rej(new Error("no port"))));
    });
  });
}

// The servers still running and the temporary directories Server.start
// made: killed and removed when the test process exits, so a test that
// forgets close (or fails before it) leaves no process behind, and nothing
// in the system's temporary directory.
const running = new Set<ChildProcess>();
const madeRoots = new Set<string>();
process.on("exit", () => {
  for (const p of running) p.kill("SIGKILL");
  for (const root of madeRoots) rmSync(root, { recursive: true, force: true });
});

/** A `rewind serve` child process. */
export class Server {
  readonly url: string;
  readonly dataDir: string;
  readonly #logPath: string;
  #proc: ChildProcess | undefined;
  #exited: Promise<number | null> = Promise.resolve(null);

  private constructor(readonly port: number, dataDir: string, readonly extra: string[]) {
    this.url = `http://127.0.0.1:${port}`;
    this.dataDir = dataDir;
    this.#logPath = join(dataDir, "..", `server-${port}.log`);
  }

  /** start starts a server on a free port (or port), with its data in a new temporary directory (or dataDir), and waits until it answers. */
  static async start(opts: { port?: number; dataDir?: string; extra?: string[] } = {}): Promise<Server> {
    let root: string;
    if (opts.dataDir) root = dirname(opts.dataDir);
    else madeRoots.add((root = mkdtempSync(join(tmpdir(), "rewind-ts-"))));
    const s = new Server(opts.port ?? (await freePort()), opts.dataDir ?? join(root, "data"), opts.extra ?? []);
    await s.restart();
    return s;
  }

  /** restart starts the process again on the same port and data (after stop or kill). */
  async restart(): Promise<void> {
    const log = openSync(this.#logPath, "a");
    const p = spawn(rewindBin(), ["serve", "--listen", `127.0.0.1:${this.port}`, "--data", this.dataDir, "--log-level", "warn", ...this.extra], {
      stdio: ["ignore", log, log],
      env: { ...process.env, REWIND_SERVER: "" },
    });
    closeSync(log);
    this.#proc = p;
    running.add(p);
    p.on("exit", () => running.delete(p));
    this.#exited = new Promise((res) => p.on("exit", (code) => res(code)));
    let exited = false;
    void this.#exited.then(() => (exited = true));
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (exited) throw new Error(`rewind serve exited before it was ready\n${this.log()}`);
      try {
        const r = await fetch(`${this.url}/rewind.v1.TopicService/ListTopics`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
        });
        if (r.ok || r.status === 401) return; // 401: a server with --auth, answering
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`rewind serve not ready after 60 s\n${this.log()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** stop sends SIGTERM and waits for the process to exit. */
  async stop(): Promise<void> {
    if (!this.#proc || this.#proc.exitCode !== null) return;
    this.#proc.kill("SIGTERM");
    await this.#exited;
  }

  /** kill kills the process (SIGKILL) and waits for it. */
  async kill(): Promise<void> {
    if (!this.#proc || this.#proc.exitCode !== null || this.#proc.signalCode !== null) return;
    this.#proc.kill("SIGKILL");
    await this.#exited;
  }

  /** pause stops the process (SIGSTOP): it keeps its connections and answers nothing, a gray failure. */
  pause(): void {
    this.#proc?.kill("SIGSTOP");
  }

  /** resume continues a paused process (SIGCONT). */
  resume(): void {
    this.#proc?.kill("SIGCONT");
  }

  /** log is the server's output so far. */
  log(): string {
    return existsSync(this.#logPath) ? readFileSync(this.#logPath, "utf8") : "";
  }

  /** close kills the server and deletes its data. */
  async close(): Promise<void> {
    await this.kill();
    rmSync(dirname(this.dataDir), { recursive: true, force: true });
  }
}
