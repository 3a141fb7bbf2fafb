// RewindError: what instanceof says, decoded details (a ConditionFailed
// detail makes a ConditionError), and how transport
// failures are classified (a connection that could not be made or broke is
// Unavailable; the server's own errors keep their code).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConditionError, ConnectError, ReconnectError, RewindError, FilterFailure } from "../src/index.js";
import { badNode, notDone, toRewindError } from "../src/errors.js";
import { ConditionFailedSchema, FilterErrorSchema, OffsetRangeSchema } from "../src/gen/rewind/v1/errors_pb.js";
import { Expect } from "../src/gen/rewind/v1/publish_pb.js";

test("instanceof", () => {
  const plain = new ConnectError("x", Code.NotFound);
  assert.equal(plain instanceof RewindError, false, "a plain ConnectError is no RewindError");
  const r = toRewindError(plain);
  assert.ok(r instanceof RewindError);
  assert.ok(r instanceof ConnectError, "a RewindError is a ConnectError");
  assert.ok(ConnectError.from(r) === r, "connect-es keeps it as it is");
  assert.equal(r.code, Code.NotFound);
  const re = new ReconnectError(r, 1000, 3);
  assert.ok(re instanceof ReconnectError && re instanceof RewindError);
  assert.equal(r instanceof ReconnectError, false);
});

test("details are decoded", () => {
  const e = toRewindError(
    new ConnectError("out of range", Code.OutOfRange, undefined, [
      { desc: OffsetRangeSchema, value: { partition: 2, requestedOffset: 9n, logStartOffset: 3n, endOffset: 7n } },
    ]),
  );
  assert.equal(e.offsetRange?.partition, 2);
  assert.equal(e.offsetRange?.requestedOffset, 9n);
  assert.equal(e.filterError, undefined);
  assert.equal(badNode(e), false);
  const f = toRewindError(
    new ConnectError("filter failed", Code.Aborted, undefined, [
      { desc: FilterErrorSchema, value: { module: "sha256:ab", failure: FilterFailure.TRAP, resumeToken: "tok" } },
    ]),
  );
  assert.equal(f.code, Code.Aborted, "the server's Aborted stays Aborted");
  assert.equal(f.filterError?.failure, FilterFailure.TRAP);
  assert.equal(f.filterError?.resumeToken, "tok");
  assert.equal(badNode(f), false);
});

test("transport failures are Unavailable, and only a refused connection certainly did nothing", () => {
  const refused = toRewindError(new TypeError("fetch failed", { cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }) }));
  assert.equal(refused.code, Code.Unavailable);
  assert.ok(badNode(refused));
  assert.ok(notDone(refused));
  const reset = toRewindError(new ConnectError("http/2 stream closed with error code INTERNAL_ERROR (0x2)", Code.Internal));
  assert.equal(reset.code, Code.Unavailable);
  assert.ok(badNode(reset));
  assert.equal(notDone(reset), false, "a broken stream may have done its work");
  const internal = toRewindError(new ConnectError("internal error", Code.Internal));
  assert.equal(internal.code, Code.Internal, "the server's Internal stays Internal");
  assert.equal(badNode(internal), false);
  const stored = toRewindError(new ConnectError("draining", Code.Unavailable, { "Rewind-Not-Stored": "1" }));
  assert.ok(stored.notStored && notDone(stored));
  const hint = toRewindError(new ConnectError("not the leader", Code.Unavailable, { "Rewind-Leader": "3", "Rewind-Leader-Address": "127.0.0.1:7073" }));
  assert.equal(hint.leader, 3n);
  assert.equal(hint.leaderAddress, "127.0.0.1:7073");
  assert.ok(toRewindError(hint, true).outcomeUnknown);
});

test("a ConditionFailed detail makes a ConditionError", () => {
  const key = toRewindError(
    new ConnectError("condition failed", Code.FailedPrecondition, undefined, [
      { desc: ConditionFailedSchema, value: { partition: 3, key: new TextEncoder().encode("acc-1"), expected: Expect.VERSION, expectedVersion: 2n, actualVersion: 5n } },
    ]),
  );
  assert.ok(key instanceof ConditionError && key instanceof RewindError);
  assert.equal(key.code, Code.FailedPrecondition);
  assert.deepEqual(
    [key.partition, key.matched, key.expected, key.expectedVersion, key.actualVersion, key.conditionFailed?.partition],
    [3, false, "version", 2n, 5n, 3],
  );
  assert.equal(key.summary, 'key "acc-1": expected 2, actual 5');
  const none = toRewindError(
    new ConnectError("condition failed", Code.FailedPrecondition, undefined, [
      { desc: ConditionFailedSchema, value: { key: new TextEncoder().encode("acc-2"), expected: Expect.EXISTS } },
    ]),
  ) as ConditionError;
  assert.deepEqual([none.expected, none.expectedVersion, none.actualVersion], ["exists", undefined, undefined]);
  assert.equal(none.summary, 'key "acc-2": expected exists, actual none');
  const tag = toRewindError(
    new ConnectError("condition failed", Code.FailedPrecondition, undefined, [
      { desc: ConditionFailedSchema, value: { partition: 1, query: { items: [{ types: ["SeatBooked"], tags: ["course:42"] }] }, after: 7n, matchingOffset: 9n } },
    ]),
  ) as ConditionError;
  assert.ok(tag instanceof ConditionError);
  assert.deepEqual([tag.matched, tag.matchedOffset, tag.after, tag.key, tag.expected], [true, 9n, 7n, undefined, undefined]);
  assert.deepEqual(tag.query, [{ types: ["SeatBooked"], tags: ["course:42"] }]);
  // Without the detail, a FailedPrecondition stays a plain RewindError.
  assert.equal(toRewindError(new ConnectError("fenced", Code.FailedPrecondition)) instanceof ConditionError, false);
});
