// The Topics page: a form to create a topic, and the topics a page at a
// time (PAGE_SIZE, with Previous and Next), each with its configuration
// and each partition's log start and end, bytes, first and last append
// time, leader and replicas (the replicas from the cluster status). A
// topic's name opens its own page (topic.ts).

import { create } from "@bufbuild/protobuf";
import { durationProto } from "../../sdk/ts/src/client.js";
import { RetentionSchema, TopicConfigSchema } from "../../sdk/ts/src/gen/rewind/v1/topic_pb.js";
import { CleanupPolicy, type GetClusterStatusResponse, type Topic } from "../../sdk/ts/src/index.js";
import { admin, client, dur, errorText, field, fmtBytes, h, plural, showError, table, ts } from "./ui.js";

/** PAGE_SIZE is how many topics a page describes. */
export const PAGE_SIZE = 25;

/** configLine is a topic's configuration in one line ("2 partitions · replication 1 · ..."). */
export function configLine(topic: Topic): string {
  const c = topic.config;
  const r = c?.retention;
  const limits = [
    r?.maxAge ? `max age ${dur(r.maxAge)}` : "",
    r?.maxBytes ? `max ${fmtBytes(r.maxBytes)}` : "",
    r?.maxRecords ? `max ${plural(r.maxRecords, "record")}` : "",
  ].filter((x) => x !== "");
  const cleanup = r?.cleanup === CleanupPolicy.COMPACT ? "compact" : r?.cleanup === CleanupPolicy.COMPACT_DELETE ? "compact,delete" : "delete";
  return `${plural(c?.partitions ?? 0, "partition")}${c?.keyIndex === false ? " (no key index)" : ""} · replication ${c?.replicationFactor ?? 0} · retention: ${limits.length ? limits.join(", ") : "unlimited"} · cleanup: ${cleanup} · dedupe window ${
    c?.dedupeWindow ? dur(c.dedupeWindow) || "off" : "24h"
  } · created ${ts(topic.createTime)}`;
}

/** topicsPage renders the page into root. */
export function topicsPage(root: HTMLElement, query: URLSearchParams): () => void {
  const error = h("p", { class: "error", hidden: true });
  const list = h("div", { id: "topic-list" }, "loading…");
  const refresh = h("button", { type: "button" }, "Refresh");
  const prev = h("button", { id: "prev", type: "button", disabled: true }, "Previous");
  const next = h("button", { id: "next", type: "button", disabled: true }, "Next");
  const pageInfo = h("span", { id: "page-info", class: "note" });
  let page = Math.max(1, Number(query.get("page")) || 1);

  // Create.
  const name = h("input", { id: "create-name", required: true, placeholder: "orders" });
  const partitions = h("input", { id: "create-partitions", type: "number", min: 1, max: 1024, value: 1 });
  const replication = h("input", { id: "create-replication", type: "number", min: 0, value: 0, title: "0: the server's default" });
  const maxAge = h("input", { id: "create-max-age", placeholder: "none, or 7d, 36h" });
  const keyIndex = h("input", { id: "create-key-index", type: "checkbox", checked: true });
  const cleanup = h("select", { id: "create-cleanup" }, ...["delete", "compact", "compact,delete"].map((c) => h("option", { value: c }, c)));
  const createBtn = h("button", { id: "create", type: "submit" }, "Create topic");
  const createResult = h("p", { id: "create-result", class: "status" });
  const createError = h("p", { id: "create-error", class: "error", hidden: true });
  const form = h(
    "form",
    { class: "controls", id: "create-form" },
    field("Name", name),
    field("Partitions", partitions),
    field("Replication (0: default)", replication),
    field("Max age", maxAge),
    field("Cleanup", cleanup),
    h("label", { class: "check", title: "key versions, conditional appends and key reads; fixed at creation, and a topic with it cannot grow its partitions" }, keyIndex, "key index"),
    h("div", { class: "buttons" }, createBtn),
  );
  root.replaceChildren(
    h("h1", {}, "Topics"),
    h("details", { class: "create", open: query.get("create") === "1" }, h("summary", {}, "Create a topic"), form, createError, createResult),
    h("div", { class: "buttons pager" }, refresh, prev, next, pageInfo),
    error,
    list,
  );
  let stopped = false;

  const load = async (): Promise<void> => {
    try {
      const topics = (await client.listTopics()).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      let cluster: GetClusterStatusResponse | undefined;
      try {
        cluster = await client.clusterStatus();
      } catch {
        /* replicas unknown */
      }
      const pages = Math.max(1, Math.ceil(topics.length / PAGE_SIZE));
      page = Math.min(page, pages);
      const shown = topics.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);
      const details = await Promise.all(shown.map((t) => client.describeTopic(t.name)));
      if (stopped) return;
      showError(error, undefined);
      prev.disabled = page <= 1;
      next.disabled = page >= pages;
      pageInfo.textContent = topics.length === 0 ? "" : `${plural(topics.length, "topic")}: ${(page - 1) * PAGE_SIZE + 1}–${(page - 1) * PAGE_SIZE + shown.length} shown (page ${page} of ${pages})`;
      pageInfo.dataset.page = String(page);
      if (details.length === 0) {
        list.replaceChildren(h("p", {}, "No topics yet: create one above, or with ", h("code", {}, "rewind topic create NAME"), "."));
        return;
      }
      list.replaceChildren(
        ...details.map(({ topic, partitions }) => {
          const replicas = (p: number): string =>
            cluster?.partitions.find((s) => s.topic === topic.name && s.partition === p)?.replicas.join(", ") ?? "";
          return h(
            "section",
            { class: "topic", "data-topic": topic.name },
            h("h2", {}, h("a", { href: `#/topic?name=${encodeURIComponent(topic.name)}` }, topic.name)),
            h("p", { class: "config" }, configLine(topic)),
            table(
              "partitions",
              ["Partition", "Log start", "End", "Records", "Bytes", "First append", "Last append", "Leader", "Replicas"],
              partitions.map((p) => [
                String(p.partition),
                String(p.logStartOffset),
                String(p.endOffset),
                String(p.endOffset - p.logStartOffset),
                fmtBytes(p.bytes),
                ts(p.firstAppendTime),
                ts(p.lastAppendTime),
                p.leader === 0n ? "none" : String(p.leader),
                replicas(p.partition),
              ]),
            ),
            h("a", { href: `#/topic?name=${encodeURIComponent(topic.name)}` }, "Produce, alter or delete"),
            " · ",
            h("a", { href: `#/replay?topic=${encodeURIComponent(topic.name)}` }, "Replay this topic"),
          );
        }),
      );
    } catch (e) {
      if (!stopped) showError(error, e);
    }
  };
  const go = (p: number): void => {
    page = p;
    history.replaceState(null, "", `#/topics?page=${page}`);
    void load();
  };
  prev.addEventListener("click", () => go(page - 1));
  next.addEventListener("click", () => go(page + 1));
  refresh.addEventListener("click", () => void load());
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    showError(createError, undefined);
    createResult.textContent = "";
    let config;
    try {
      const age = maxAge.value.trim();
      config = create(TopicConfigSchema, {
        partitions: Number(partitions.value) || 1,
        replicationFactor: Number(replication.value) || 0,
        retention: create(RetentionSchema, {
          maxAge: age ? durationProto(age) : undefined,
          cleanup: { delete: CleanupPolicy.DELETE, compact: CleanupPolicy.COMPACT, "compact,delete": CleanupPolicy.COMPACT_DELETE }[cleanup.value] ?? CleanupPolicy.DELETE,
        }),
        keyIndex: keyIndex.checked,
      });
    } catch (e) {
      showError(createError, e);
      return;
    }
    admin()
      .topics.createTopic({ name: name.value.trim(), config })
      .then((r) => r.topic!)
      .then(
        (t) => {
          createResult.textContent = `Created ${t.name}: ${configLine(t)}.`;
          createResult.dataset.topic = t.name;
          void load();
        },
        (e: unknown) => showError(createError, errorText(e)),
      );
  });
  void load();
  return () => {
    stopped = true;
  };
}
