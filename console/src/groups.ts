// The Groups page: the groups; for one group its members, assignments and
// generation, the lag of each partition in records and seconds (polled
// every few seconds, with a chart of the last minutes kept in memory), and
// resets: a dry-run plan first, then an explicit execute.

import type { GroupTopic, ResetGroupResponse } from "../../sdk/ts/src/index.js";
import { client, confirmButton, durSeconds, errorText, field, fmtMs, h, parsePartitions, plural, showError, table, ts } from "./ui.js";

/** POLL_MS is how often a group is described again. */
const POLL_MS = 3000;
/** HISTORY_MS is how far back the lag chart goes. */
const HISTORY_MS = 10 * 60 * 1000;

interface Sample {
  at: number;
  records: number;
  seconds: number;
}

/** history: per "group/topic", the lag samples of this page's lifetime (kept across visits). */
const history = new Map<string, Sample[]>();

/** chart draws samples as an SVG line of lag in records over time (the last HISTORY_MS at most). */
function chart(samples: Sample[]): SVGSVGElement {
  const ns = "http://www.w3.org/2000/svg";
  const W = 480;
  const H = 90;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H + 14}`);
  svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img");
  const now = Date.now();
  const max = Math.max(1, ...samples.map((s) => s.records));
  // The time axis spans the samples kept: at least a minute, at most HISTORY_MS.
  const span = Math.min(HISTORY_MS, Math.max(60_000, samples.length ? now - samples[0].at : 0));
  const x = (at: number): number => W - ((now - at) / span) * W;
  const y = (v: number): number => H - (v / max) * (H - 4);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", samples.map((s) => `${x(s.at).toFixed(1)},${y(s.records).toFixed(1)}`).join(" "));
  line.setAttribute("class", "lag");
  const axis = document.createElementNS(ns, "line");
  for (const [k, v] of [["x1", 0], ["y1", H], ["x2", W], ["y2", H]] as const) axis.setAttribute(k, String(v));
  axis.setAttribute("class", "axis");
  const label = (tx: number, anchor: string, s: string): SVGTextElement => {
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", String(tx));
    t.setAttribute("y", String(H + 12));
    t.setAttribute("text-anchor", anchor);
    t.textContent = s;
    return t;
  };
  const top = document.createElementNS(ns, "text");
  top.setAttribute("x", "2");
  top.setAttribute("y", "10");
  top.textContent = plural(max, "record");
  svg.setAttribute("data-samples", String(samples.length));
  svg.append(axis, line, top, label(0, "start", `-${fmtMs(span)}`), label(W, "end", "now"));
  for (const s of samples) {
    const dot = document.createElementNS(ns, "circle");
    dot.setAttribute("cx", x(s.at).toFixed(1));
    dot.setAttribute("cy", y(s.records).toFixed(1));
    dot.setAttribute("r", "2");
    dot.setAttribute("class", "lag");
    svg.append(dot);
  }
  return svg;
}

/** groupsPage renders the page into root. */
export function groupsPage(root: HTMLElement, query: URLSearchParams): () => void {
  const group = query.get("group") ?? "";
  const error = h("p", { class: "error", hidden: true });
  const list = h("div", { id: "group-list" }, "loading…");
  root.replaceChildren(h("h1", {}, "Groups"), error, list);
  let stopped = false;
  let timer = 0;

  if (group === "") {
    // The list: each group's state (its members now) and total lag, from
    // DescribeGroup per group; Delete asks first (with Force when members
    // are connected: their streams end).
    const load = async (): Promise<void> => {
      try {
        const gs = (await client.listGroups()).sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : a.topic < b.topic ? -1 : 1));
        const described = await Promise.all(gs.map((g) => client.describeGroup(g.group).catch(() => undefined)));
        if (stopped) return;
        showError(error, undefined);
        if (gs.length === 0) {
          list.replaceChildren(h("p", {}, "No groups yet."));
          return;
        }
        list.replaceChildren(
          table(
            "groups",
            ["Group", "Topic", "State", "Lag (records)", "Members", "Generation", ""],
            gs.map((g, i) => {
              const t = described[i]?.find((x) => x.topic === g.topic);
              const lag = t ? t.partitions.reduce((a, p) => a + p.lag, 0n) : undefined;
              const force = h("input", { type: "checkbox", class: "force" });
              return [
                h("a", { href: `#/groups?group=${encodeURIComponent(g.group)}` }, g.group),
                g.topic,
                h("span", { class: "state" }, g.members > 0 ? "active" : "empty"),
                h("span", { class: "lag" }, lag === undefined ? "unknown" : String(lag)),
                String(g.members),
                String(g.generation),
                h(
                  "span",
                  { class: "row-actions" },
                  confirmButton(
                    `delete-group-${i}`,
                    "Delete",
                    `Delete group ${g.group} and its commits?`,
                    async () => {
                      await client.deleteGroup(g.group, { force: force.checked });
                      await load();
                    },
                    (e) => showError(error, errorText(e)),
                  ),
                  g.members > 0 ? h("label", { class: "check" }, force, "force (ends its members' streams)") : null,
                ),
              ];
            }),
          ),
        );
        for (const [i, tr] of [...list.querySelectorAll("table.groups tbody tr")].entries()) (tr as HTMLElement).dataset.group = gs[i].group;
      } catch (e) {
        if (!stopped) showError(error, e);
      }
    };
    void load();
    return () => {
      stopped = true;
    };
  }

  // One group.
  const view = h("div", { id: "group-view" });
  const resetBox = h("section", { class: "reset" });
  list.replaceChildren(h("h2", {}, `Group ${group}`), view, resetBox);
  let topics: GroupTopic[] = [];

  const render = (): void => {
    view.replaceChildren(
      ...topics.map((t) => {
        const samples = history.get(`${group}/${t.topic}`) ?? [];
        const last = samples[samples.length - 1];
        return h(
          "section",
          { class: "group-topic", "data-topic": t.topic },
          h("h3", {}, `Topic ${t.topic}`),
          h("p", { class: "config" }, `generation ${t.generation} · epoch ${t.epoch} · ${plural(t.members.length, "member")}`),
          t.members.length
            ? table(
                "members",
                ["Member", "Client", "Partitions", "Joined"],
                t.members.map((m) => [m.memberId, m.clientName, m.partitions.join(", "), ts(m.joinTime)]),
              )
            : h("p", {}, "No member is connected."),
          table(
            "lag",
            ["Partition", "Member", "Committed", "End", "Lag (records)", "Lag (time)", "Commit time"],
            t.partitions.map((p) => [
              String(p.partition),
              p.memberId,
              p.committed ? String(p.committedOffset) + (p.belowLogStart ? " (below log start)" : "") : "none",
              String(p.endOffset),
              h("span", { class: "lag-records", "data-partition": p.partition }, String(p.lag)),
              durSeconds(p.lagTime) > 0 ? fmtMs(durSeconds(p.lagTime) * 1000) : "0",
              ts(p.commitTime),
            ]),
          ),
          h("p", { class: "note" }, last ? `Total lag ${plural(last.records, "record")}, oldest ${fmtMs(last.seconds * 1000)} ago (chart: lag in records over the last minutes, polled every ${POLL_MS / 1000} s)` : ""),
          chart(samples),
        );
      }),
    );
  };

  const load = async (): Promise<void> => {
    try {
      const ts = await client.describeGroup(group);
      if (stopped) return;
      showError(error, undefined);
      topics = ts;
      const now = Date.now();
      for (const t of ts) {
        const key = `${group}/${t.topic}`;
        const s = history.get(key) ?? [];
        s.push({
          at: now,
          records: t.partitions.reduce((a, p) => a + Number(p.lag), 0),
          seconds: Math.max(0, ...t.partitions.map((p) => durSeconds(p.lagTime))),
        });
        while (s.length > 0 && s[0].at < now - HISTORY_MS) s.shift();
        history.set(key, s);
      }
      render();
      if (resetTopic.options.length === 0) resetTopic.replaceChildren(...ts.map((t) => h("option", { value: t.topic }, t.topic)));
    } catch (e) {
      if (!stopped) showError(error, e);
    }
  };

  // Reset: plan, then execute exactly the plan's request.
  const resetTopic = h("select", { id: "reset-topic" });
  const target = h("input", { id: "reset-target", value: "earliest", placeholder: "earliest, latest, -1h, @TIME, 42, +N, -N" });
  const resetParts = h("input", { id: "reset-partitions", placeholder: "all, or 0,2" });
  const planBtn = h("button", { id: "plan", type: "submit" }, "Plan (dry run)");
  const execBtn = h("button", { id: "execute", type: "button", disabled: true, class: "danger" }, "Execute");
  const resetError = h("p", { class: "error", hidden: true });
  const plan = h("div", { id: "plan-view" });
  const form = h("form", { class: "controls" }, field("Topic", resetTopic), field("Target", target), field("Partitions", resetParts), h("div", { class: "buttons" }, planBtn, execBtn));
  resetBox.replaceChildren(h("h2", {}, "Reset offsets"), form, resetError, plan);
  let planned: { topic: string; target: string; partitions: number[] } | undefined;

  const showPlan = (r: ResetGroupResponse): void => {
    plan.replaceChildren(
      h("p", { id: "reset-result", "data-executed": String(r.executed) }, r.executed ? `Executed: generation ${r.generation}, epoch ${r.epoch}.` : "Dry run: nothing changed yet. Execute to apply this plan."),
      table(
        "plan",
        ["Partition", "Current", "New", "Records to re-read", "Lag after", ""],
        r.plan.map((p) => [
          String(p.partition),
          p.hadCommit ? String(p.currentOffset) : "none",
          String(p.newOffset),
          String(p.recordsToReread),
          String(p.lag),
          p.clamped ? "clamped" : "",
        ]),
      ),
    );
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    showError(resetError, undefined);
    execBtn.disabled = true;
    planned = undefined;
    let req: { topic: string; target: string; partitions: number[] };
    try {
      req = { topic: resetTopic.value, target: target.value.trim(), partitions: parsePartitions(resetParts.value) };
    } catch (e) {
      showError(resetError, e);
      return;
    }
    client.resetGroup(group, req.topic, req.target, { dryRun: true, partitions: req.partitions }).then(
      (r) => {
        showPlan(r);
        planned = req;
        execBtn.disabled = false;
      },
      (e) => showError(resetError, errorText(e)),
    );
  });
  execBtn.addEventListener("click", () => {
    if (!planned) return;
    const req = planned;
    planned = undefined;
    execBtn.disabled = true;
    client.resetGroup(group, req.topic, req.target, { execute: true, partitions: req.partitions }).then(
      (r) => {
        showPlan(r);
        void load();
      },
      (e) => showError(resetError, errorText(e)),
    );
  });
  // Changing the request invalidates the plan.
  for (const el of [resetTopic, target, resetParts]) el.addEventListener("input", () => ((planned = undefined), (execBtn.disabled = true)));

  void load();
  timer = window.setInterval(() => void load(), POLL_MS);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
