// The page of one topic (#/topic?name=NAME): its configuration and
// partitions; a form to produce a record (key, value, headers, idempotency
// key, partition); its newest records, or the records a search finds (a
// substring of the key, value or headers, matched by the server:
// SubscribeRequest.contains, no filter module needed); a form to alter it
// (grow the partitions, replace the retention); and Delete, which asks
// first.

import { create } from "@bufbuild/protobuf";
import { durationProto } from "../../sdk/ts/src/client.js";
import { CleanupPolicy, RetentionSchema, type Topic } from "../../sdk/ts/src/gen/rewind/v1/topic_pb.js";
import type { Subscription as Stream } from "../../sdk/ts/src/index.js";
import { RecordList } from "./recordlist.js";
import { configLine } from "./topics.js";
import { admin, client, confirmButton, errorText, field, fmtBytes, formatDuration, h, plural, showError, table, ts } from "./ui.js";

/** NEWEST is how many records per partition the page shows without a search. */
const NEWEST = 50;
/** MAX_FOUND bounds the records a search keeps. */
const MAX_FOUND = 5000;

type Cleanup = "delete" | "compact" | "compact,delete";

/** headersOf parses "name: value" lines (empty lines skipped). */
export function headersOf(s: string): { key: string; value: string }[] {
  const out: { key: string; value: string }[] = [];
  for (const line of s.split("\n")) {
    if (line.trim() === "") continue;
    const i = line.indexOf(":");
    if (i <= 0) throw new Error(`header ${JSON.stringify(line)}: want "name: value"`);
    out.push({ key: line.slice(0, i).trim(), value: line.slice(i + 1).trim() });
  }
  return out;
}

/** topicPage renders the page into root. */
export function topicPage(root: HTMLElement, query: URLSearchParams): () => void {
  const name = query.get("name") ?? "";
  const error = h("p", { class: "error", hidden: true });
  const config = h("p", { class: "config", id: "topic-config" }, "loading…");
  const parts = h("div", { id: "topic-partitions" });
  let stopped = false;
  let topic: Topic | undefined;

  // Produce.
  const key = h("input", { id: "produce-key", placeholder: "none, or user-1" });
  const value = h("textarea", { id: "produce-value", rows: 3, placeholder: '{"total": 12}' });
  const headers = h("textarea", { id: "produce-headers", rows: 2, placeholder: "name: value, one a line" });
  const idem = h("input", { id: "produce-idempotency", placeholder: "none, or order-1" });
  const partition = h("input", { id: "produce-partition", type: "number", min: 0, placeholder: "by key" });
  const send = h("button", { id: "produce-send", type: "submit" }, "Produce");
  const produced = h("p", { id: "produce-result", class: "status" });
  const produceError = h("p", { id: "produce-error", class: "error", hidden: true });
  const produceForm = h(
    "form",
    { class: "controls", id: "produce" },
    field("Key", key),
    field("Value", value),
    field("Headers", headers),
    field("Idempotency key", idem),
    field("Partition", partition),
    h("div", { class: "buttons" }, send),
  );

  // Records: the newest, or a search.
  const search = h("input", { id: "records-search", type: "search", placeholder: "text in a key, value or header" });
  const searchBtn = h("button", { id: "records-go", type: "submit" }, "Search");
  const recStatus = h("p", { id: "records-status", class: "status" });
  const recError = h("p", { id: "records-error", class: "error", hidden: true });
  const list = new RecordList(MAX_FOUND);
  const searchForm = h("form", { class: "controls", id: "records-form" }, field("Search all records", search), h("div", { class: "buttons" }, searchBtn));

  // Alter.
  const alterParts = h("input", { id: "alter-partitions", type: "number", min: 1, max: 1024 });
  const alterAge = h("input", { id: "alter-max-age", placeholder: "none, or 7d" });
  const alterBytes = h("input", { id: "alter-max-bytes", type: "number", min: 0, placeholder: "0: none" });
  const alterRecords = h("input", { id: "alter-max-records", type: "number", min: 0, placeholder: "0: none" });
  const alterCleanup = h("select", { id: "alter-cleanup" }, ...["delete", "compact", "compact,delete"].map((c) => h("option", { value: c }, c)));
  const alterBtn = h("button", { id: "alter-apply", type: "submit" }, "Apply");
  const alterResult = h("p", { id: "alter-result", class: "status" });
  const alterError = h("p", { id: "alter-error", class: "error", hidden: true });
  const alterForm = h(
    "form",
    { class: "controls", id: "alter" },
    field("Partitions (can only grow)", alterParts),
    field("Max age", alterAge),
    field("Max bytes per partition", alterBytes),
    field("Max records per partition", alterRecords),
    field("Cleanup", alterCleanup),
    h("div", { class: "buttons" }, alterBtn),
  );
  const deleteError = h("p", { id: "delete-error", class: "error", hidden: true });
  const del = confirmButton(
    "delete-topic",
    "Delete topic",
    `Delete ${name} and every record in it? This cannot be undone.`,
    async () => {
      await client.deleteTopic(name);
      location.hash = "#/topics";
    },
    (e) => showError(deleteError, errorText(e)),
  );

  root.replaceChildren(
    h("h1", {}, `Topic ${name}`),
    error,
    config,
    parts,
    h("p", {}, h("a", { href: `#/replay?topic=${encodeURIComponent(name)}` }, "Replay this topic"), " · ", h("a", { href: "#/topics" }, "All topics")),
    h("h2", {}, "Produce a record"),
    produceForm,
    produceError,
    produced,
    h("h2", {}, "Records"),
    searchForm,
    recStatus,
    recError,
    list.el,
    h("h2", {}, "Alter"),
    alterForm,
    alterError,
    alterResult,
    h("h2", {}, "Delete"),
    del,
    deleteError,
  );

  const fillAlter = (t: Topic): void => {
    const r = t.config?.retention;
    alterParts.value = String(t.config?.partitions ?? 1);
    // A topic with the key index cannot grow (key versions count per partition).
    alterParts.disabled = t.config?.keyIndex !== false;
    alterParts.title = alterParts.disabled ? "this topic keeps the key index: its partitions cannot grow" : "";
    alterAge.value = r?.maxAge ? formatDuration(r.maxAge) : "";
    alterBytes.value = r?.maxBytes ? String(r.maxBytes) : "";
    alterRecords.value = r?.maxRecords ? String(r.maxRecords) : "";
    alterCleanup.value = r?.cleanup === CleanupPolicy.COMPACT ? "compact" : r?.cleanup === CleanupPolicy.COMPACT_DELETE ? "compact,delete" : "delete";
  };

  const describe = async (): Promise<void> => {
    try {
      const d = await client.describeTopic(name);
      if (stopped) return;
      showError(error, undefined);
      const first = topic === undefined;
      topic = d.topic;
      config.textContent = configLine(d.topic);
      if (first) fillAlter(d.topic);
      parts.replaceChildren(
        table(
          "partitions",
          ["Partition", "Log start", "End", "Records", "Bytes", "Last append", "Leader"],
          d.partitions.map((p) => [
            String(p.partition),
            String(p.logStartOffset),
            String(p.endOffset),
            String(p.endOffset - p.logStartOffset),
            fmtBytes(p.bytes),
            ts(p.lastAppendTime),
            p.leader === 0n ? "none" : String(p.leader),
          ]),
        ),
      );
    } catch (e) {
      if (!stopped) showError(error, e);
    }
  };

  let stream: Stream | undefined;
  const setRecStatus = (state: string, text: string): void => {
    recStatus.textContent = text;
    recStatus.dataset.state = state;
  };
  const readRecords = async (): Promise<void> => {
    stream?.close();
    const needle = search.value;
    list.clear();
    showError(recError, undefined);
    setRecStatus("reading", needle ? "searching…" : "reading…");
    const s = client.replay(name, { from: needle ? "earliest" : `-${NEWEST}`, to: "end", contains: needle || undefined });
    stream = s;
    let n = 0;
    try {
      for await (const ev of s) {
        if (ev.kind === "records") {
          list.add(ev.records);
          n += ev.records.length;
        }
      }
      if (stream !== s) return;
      list.flush();
      setRecStatus(
        "done",
        needle
          ? `${plural(n, "record")} contain ${JSON.stringify(needle)} in the key, value or a header${list.dropped ? ` (the newest ${MAX_FOUND} shown)` : ""}.`
          : `The newest ${plural(n, "record")} (at most ${NEWEST} a partition).`,
      );
    } catch (e) {
      if (stream !== s) return;
      setRecStatus("error", "");
      showError(recError, errorText(e));
    }
  };
  searchForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void readRecords();
  });

  produceForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    showError(produceError, undefined);
    produced.textContent = "";
    let msg;
    try {
      msg = {
        key: key.value === "" ? undefined : key.value,
        value: value.value,
        headers: headersOf(headers.value),
        idempotencyKey: idem.value.trim() || undefined,
        partition: partition.value === "" ? undefined : Number(partition.value),
      };
    } catch (e) {
      showError(produceError, e);
      return;
    }
    send.disabled = true;
    client.publish(name, msg).then(
      ([r]) => {
        send.disabled = false;
        produced.textContent = `${r.duplicate ? "Already stored (same idempotency key)" : "Stored"} in partition ${r.partition} at offset ${r.offset} (message ID ${r.messageId}).`;
        produced.dataset.partition = String(r.partition);
        produced.dataset.offset = String(r.offset);
        void describe();
        void readRecords();
      },
      (e: unknown) => {
        send.disabled = false;
        showError(produceError, errorText(e));
      },
    );
  });

  alterForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    showError(alterError, undefined);
    alterResult.textContent = "";
    let req;
    try {
      const n = Number(alterParts.value);
      if (!Number.isInteger(n) || n < 1) throw new Error("partitions: want a whole number from 1");
      req = {
        name,
        partitions: n === (topic?.config?.partitions ?? n) ? undefined : n,
        retention: create(RetentionSchema, {
          maxAge: alterAge.value.trim() ? durationProto(alterAge.value.trim()) : undefined,
          maxBytes: BigInt(alterBytes.value || 0),
          maxRecords: BigInt(alterRecords.value || 0),
          cleanup: { delete: CleanupPolicy.DELETE, compact: CleanupPolicy.COMPACT, "compact,delete": CleanupPolicy.COMPACT_DELETE }[alterCleanup.value as Cleanup],
          deleteRetention: topic?.config?.retention?.deleteRetention,
          localMaxAge: topic?.config?.retention?.localMaxAge,
          localMaxBytes: topic?.config?.retention?.localMaxBytes ?? 0n,
        }),
      };
    } catch (e) {
      showError(alterError, e);
      return;
    }
    admin()
      .topics.alterTopic(req)
      .then(
        (r) => {
          if (r.topic) {
            topic = r.topic;
            fillAlter(r.topic);
            alterResult.textContent = `Altered: ${configLine(r.topic)}.`;
          }
          void describe();
        },
        (e: unknown) => showError(alterError, errorText(e)),
      );
  });

  void describe();
  void readRecords();
  return () => {
    stopped = true;
    stream?.close();
  };
}
