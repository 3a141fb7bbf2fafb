// The Topics page: every topic with its configuration, and each partition's
// log start and end, bytes, first and last append time, leader and
// replicas (the replicas from the cluster status).

import { CleanupPolicy, type GetClusterStatusResponse } from "../../sdk/ts/src/index.js";
import { client, dur, fmtBytes, h, plural, showError, table, ts } from "./ui.js";

/** topicsPage renders the page into root. */
export function topicsPage(root: HTMLElement): () => void {
  const error = h("p", { class: "error", hidden: true });
  const list = h("div", { id: "topic-list" }, "loading…");
  const refresh = h("button", { type: "button" }, "Refresh");
  root.replaceChildren(h("h1", {}, "Topics"), refresh, error, list);
  let stopped = false;

  const load = async (): Promise<void> => {
    try {
      const topics = await client.listTopics();
      let cluster: GetClusterStatusResponse | undefined;
      try {
        cluster = await client.clusterStatus();
      } catch {
        /* replicas unknown */
      }
      const details = await Promise.all(topics.slice(0, 100).map((t) => client.describeTopic(t.name)));
      if (stopped) return;
      showError(error, undefined);
      if (details.length === 0) {
        list.replaceChildren(h("p", {}, "No topics yet: create one with ", h("code", {}, "rewind topic create NAME"), "."));
        return;
      }
      list.replaceChildren(
        ...details.map(({ topic, partitions }) => {
          const c = topic.config;
          const r = c?.retention;
          const replicas = (p: number): string =>
            cluster?.partitions.find((s) => s.topic === topic.name && s.partition === p)?.replicas.join(", ") ?? "";
          const limits = [
            r?.maxAge ? `max age ${dur(r.maxAge)}` : "",
            r?.maxBytes ? `max ${fmtBytes(r.maxBytes)}` : "",
            r?.maxRecords ? `max ${plural(r.maxRecords, "record")}` : "",
          ].filter((x) => x !== "");
          return h(
            "section",
            { class: "topic", "data-topic": topic.name },
            h("h2", {}, topic.name),
            h(
              "p",
              { class: "config" },
              `${plural(c?.partitions ?? 0, "partition")} · replication ${c?.replicationFactor ?? 0} · retention: ${limits.length ? limits.join(", ") : "unlimited"} · cleanup: ${
                r?.cleanup === CleanupPolicy.COMPACT ? "compact" : "delete"
              } · dedupe window ${c?.dedupeWindow ? dur(c.dedupeWindow) || "off" : "24h"} · created ${ts(topic.createTime)}`,
            ),
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
            h("a", { href: `#/replay?topic=${encodeURIComponent(topic.name)}` }, "Replay this topic"),
          );
        }),
      );
    } catch (e) {
      if (!stopped) showError(error, e);
    }
  };
  refresh.addEventListener("click", () => void load());
  void load();
  return () => {
    stopped = true;
  };
}
