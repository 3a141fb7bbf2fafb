// The Cluster page: the nodes, each partition's leader and replicas, and
// the replicas' lag behind their leader (raft entries), as the node that
// served the console sees them. Refreshed every few seconds.

import { client, h, showError, table } from "./ui.js";

/** clusterPage renders the page into root. */
export function clusterPage(root: HTMLElement): () => void {
  const error = h("p", { class: "error", hidden: true });
  const summary = h("p", { id: "cluster-summary" }, "loading…");
  const nodes = h("div", { id: "nodes" });
  const parts = h("div", { id: "cluster-partitions" });
  root.replaceChildren(h("h1", {}, "Cluster"), error, summary, h("h2", {}, "Nodes"), nodes, h("h2", {}, "Partitions"), parts);
  let stopped = false;

  const load = async (): Promise<void> => {
    try {
      const s = await client.clusterStatus();
      if (stopped) return;
      showError(error, undefined);
      summary.textContent = `${s.clusterId === 0n ? "A single node" : `Cluster ${s.clusterId}`} · answered by node ${s.nodeId} · metadata leader ${
        s.metadataLeader === 0n ? "unknown" : s.metadataLeader
      }`;
      nodes.replaceChildren(
        table(
          "nodes",
          ["Node", "Address", "", "Connected", "Dropped messages"],
          s.nodes.map((n) => [
            String(n.id),
            n.address || location.host,
            [n.self ? "this node" : "", n.leaving ? "leaving" : ""].filter((x) => x).join(", "),
            n.self ? "" : n.connected ? "yes" : "no",
            String(n.droppedMessages),
          ]),
        ),
      );
      parts.replaceChildren(
        table(
          "cluster-partitions",
          ["Topic", "Partition", "Leader", "Replicas", "Term", "Offsets", "Replica lag (entries)"],
          s.partitions.map((p) => [
            p.topic,
            String(p.partition),
            p.leader === 0n ? "none" : String(p.leader),
            p.replicas.join(", "),
            String(p.term),
            p.hosted ? `${p.logStartOffset}–${p.nextOffset}` : "not hosted here",
            p.progress.length
              ? p.progress.map((r) => `node ${r.node}: ${r.lagUnknown ? "unknown" : String(r.lag)}`).join(", ")
              : p.leader === s.nodeId
                ? ""
                : p.leader === 0n
                  ? ""
                  : `on node ${p.leader}'s console`,
          ]),
        ),
      );
    } catch (e) {
      if (!stopped) showError(error, e);
    }
  };
  void load();
  const timer = setInterval(() => void load(), 5000);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
