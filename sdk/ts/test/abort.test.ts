// How a call or stream the caller stops ends: an abort keeps the caller's
// reason (the error's cause is signal.reason), and a deadline, given as
// timeoutMs or as AbortSignal.timeout, is DeadlineExceeded. The calls run
// against a real server, or against a node that is down, where the client
// retries until its window (set far beyond the test) would end: only the
// caller's signal or deadline can end such a call, whatever the machine's
// speed. Also the header helpers (headerText).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Server, freePort } from "./server.js";
import { createClient, type Client } from "../src/node.js";
import { Code, RewindError, headerText, headerTexts, text } from "../src/index.js";

let srv: Server;
let client: Client;
// A client of a node nobody listens on, which would retry for ten minutes.
let down: Client;

before(async () => {
  srv = await Server.start();
  client = createClient({ baseUrl: srv.url, attemptTimeoutMs: 60_000, streamOpenTimeoutMs: 60_000 });
  down = createClient({ baseUrl: `http://127.0.0.1:${await freePort()}`, attempts: 1_000_000, retryWindowMs: 600_000 });
});
after(async () => {
  await srv?.close();
});

/** isError checks a rejection: a RewindError with code, whose cause is cause (or passes it, a predicate). */
function isError(code: Code, cause: unknown) {
  return (e: unknown) => {
    assert.ok(e instanceof RewindError, `a RewindError, got ${String(e)}`);
    assert.equal(e.code, code, `code ${Code[e.code]}, want ${Code[code]}: ${e.message}`);
    if (typeof cause === "function") assert.ok((cause as (c: unknown) => boolean)(e.cause), `cause ${String(e.cause)}`);
    else assert.equal(e.cause, cause);
    return true;
  };
}

const timeoutError = (c: unknown) => (c as { name?: string } | undefined)?.name === "TimeoutError";

describe("unary calls", () => {
  test("an abort keeps signal.reason as the error's cause", async () => {
    const ctrl = new AbortController();
    const reason = new Error("the user closed the page");
    const call = down.listTopics({ signal: ctrl.signal });
    ctrl.abort(reason);
    const err = await call.then(
      () => assert.fail("the call succeeded"),
      (e: unknown) => e,
    );
    assert.ok(isError(Code.Canceled, reason)(err));
    assert.match((err as RewindError).message, /the user closed the page/);
  });

  test("a reason that is no Error is kept as it is", async () => {
    const ctrl = new AbortController();
    ctrl.abort("shutting down");
    await assert.rejects(client.listTopics({ signal: ctrl.signal }), isError(Code.Canceled, "shutting down"));
  });

  test("an abort without a reason is Canceled, its cause the AbortError", async () => {
    const ctrl = new AbortController();
    const call = down.describeTopic("t", { signal: ctrl.signal });
    ctrl.abort();
    await assert.rejects(call, isError(Code.Canceled, (c: unknown) => (c as Error).name === "AbortError"));
  });

  test("timeoutMs ends the call, retries included, with DeadlineExceeded", async () => {
    await assert.rejects(down.listTopics({ timeoutMs: 200 }), isError(Code.DeadlineExceeded, timeoutError));
  });

  test("AbortSignal.timeout is DeadlineExceeded too", async () => {
    await assert.rejects(down.listGroups({ signal: AbortSignal.timeout(200) }), isError(Code.DeadlineExceeded, timeoutError));
  });

  test("the caller's abort wins over timeoutMs", async () => {
    const ctrl = new AbortController();
    const reason = new Error("mine");
    const call = down.listTopics({ signal: ctrl.signal, timeoutMs: 600_000 });
    ctrl.abort(reason);
    await assert.rejects(call, isError(Code.Canceled, reason));
  });

  test("a call that answers within timeoutMs is untouched", async () => {
    await client.createTopic("in-time", { timeoutMs: 600_000 });
    assert.ok((await client.listTopics({ timeoutMs: 600_000 })).some((t) => t.name === "in-time"));
  });
});

describe("streams", () => {
  test("an abort keeps signal.reason", async () => {
    await client.createTopic("s1");
    await client.publish("s1", ["a"]);
    const ctrl = new AbortController();
    const reason = new Error("enough");
    await assert.rejects(
      (async () => {
        for await (const ev of client.replay("s1", { signal: ctrl.signal })) if (ev.kind === "caughtUp") ctrl.abort(reason);
      })(),
      isError(Code.Canceled, reason),
    );
  });

  test("AbortSignal.timeout ends a live stream with DeadlineExceeded", async () => {
    await client.createTopic("s2");
    const kinds: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const ev of client.replay("s2", { signal: AbortSignal.timeout(300) })) kinds.push(ev.kind);
      })(),
      isError(Code.DeadlineExceeded, timeoutError),
    );
  });
});

test("headerText reads a header as text", async () => {
  await client.createTopic("h");
  await client.publish("h", [{ value: "v", headers: [{ key: "source", value: "web" }, { key: "tag", value: "a" }, { key: "tag", value: "b" }] }]);
  const [r] = await (async () => {
    for await (const ev of client.replay("h", { to: "end" })) if (ev.kind === "records") return ev.records;
    return [];
  })();
  assert.equal(text(r.value), "v");
  assert.equal(headerText(r, "source"), "web");
  assert.equal(headerText(r, "tag"), "a", "the first of several");
  assert.deepEqual(headerTexts(r, "tag"), ["a", "b"]);
  assert.equal(headerText(r, "Source"), undefined, "names are compared exactly");
  assert.equal(headerText(r, "missing"), undefined);
  assert.deepEqual(headerTexts(r, "missing"), []);
});
