// A scenario publisher through the TypeScript client (scenarios/runner,
// Options.Client "ts"): node tspublisher.mjs SDK_DIR NODES
//
// It makes one client of NODES (comma-separated URLs, every member) with
// the client's defaults, reads requests from standard input, a JSON object
// a line ({id, topic, key, value, idem, partition, timeoutMs}), publishes
// each, and answers on standard output, a JSON object a line: {id,
// partition, offset, messageId, duplicate, appendTimeNanos}, or {id,
// error, code, notStored}. It exits when its input ends and every call
// answered.
import { createInterface } from "node:readline";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdk, nodes] = process.argv.slice(2);
const { createClient } = await import(pathToFileURL(join(sdk, "dist", "node.js")).href);
const client = createClient({ nodes });

const answer = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const calls = new Set();
const lines = createInterface({ input: process.stdin });

lines.on("line", (line) => {
  const q = JSON.parse(line);
  const call = (async () => {
    try {
      const msg = { key: q.key, value: q.value, idempotencyKey: q.idem };
      if (q.partition !== undefined) msg.partition = q.partition;
      const [r] = await client.publish(q.topic, msg, q.timeoutMs ? { timeoutMs: q.timeoutMs } : undefined);
      answer({
        id: q.id,
        partition: r.partition,
        offset: String(r.offset),
        messageId: r.messageId,
        duplicate: r.duplicate,
        appendTimeNanos: String(r.appendTimeUnixNanos),
      });
    } catch (e) {
      answer({ id: q.id, error: String(e?.rawMessage ?? e?.message ?? e), code: typeof e?.code === "number" ? e.code : 2, notStored: !!e?.notStored });
    }
  })();
  calls.add(call);
  call.finally(() => calls.delete(call));
});

lines.on("close", async () => {
  await Promise.allSettled([...calls]);
  process.exit(0);
});
