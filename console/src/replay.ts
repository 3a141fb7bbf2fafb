// The Replay page: a topic from a start to a stop (the CLI's position
// grammar), some partitions, an optional filter; records shown as they
// stream in a virtualised list that keeps at most MAX_ROWS of them (older
// ones are dropped, and a note says how many).

import type { Subscription } from "../../sdk/ts/src/index.js";
import { RecordList } from "./recordlist.js";
import { client, copy, errorText, field, h, localTime, parsePartitions, plural, shellQuote, timeZone } from "./ui.js";

/** MAX_ROWS bounds the records the page keeps in memory; the DOM holds only the rows in view. */
export const MAX_ROWS = 5000;

interface Params {
  topic: string;
  from: string;
  to: string;
  partitions: number[];
  plugin: string;
  /** A module sent with the request instead of a registered plugin. */
  file?: { name: string; module: Uint8Array };
  config: string;
}

/** cliCommand is the `rewind replay` command of the same replay. */
export function cliCommand(p: Params): string {
  const args = ["rewind", "replay", shellQuote(p.topic), "--from", shellQuote(p.from)];
  if (p.to !== "") args.push("--to", shellQuote(p.to));
  else args.push("--follow");
  if (p.partitions.length > 0) args.push("--partition", p.partitions.join(","));
  if (p.plugin !== "") args.push("--filter", shellQuote(p.plugin));
  if (p.file) args.push("--filter-file", shellQuote(p.file.name));
  if ((p.plugin !== "" || p.file) && p.config !== "") args.push("--filter-config", shellQuote(p.config));
  const server = location.host;
  if (server !== "127.0.0.1:7070") args.push("--server", shellQuote(server));
  return args.join(" ");
}

/** replayPage renders the page into root; the returned function stops it. */
export function replayPage(root: HTMLElement, query: URLSearchParams): () => void {
  const topic = h("input", { id: "topic", required: true, list: "topics", value: query.get("topic") ?? "", placeholder: "orders" });
  const from = h("input", { id: "from", value: query.get("from") ?? "earliest", placeholder: "earliest, -15m, @2026-12-01T10:00:00Z, 42, token:..." });
  // The date-time picker: a local time, which sets From to "@" and the UTC instant.
  const fromTime = h("input", { id: "from-time", type: "datetime-local", step: "0.001" });
  const fromTimeShown = h("span", { id: "from-time-shown", class: "note" });
  const showFromTime = (): void => {
    const m = /^@(.+)$/.exec(from.value.trim());
    const d = m ? new Date(/^\d+$/.test(m[1]) ? Number(m[1]) : m[1]) : undefined;
    fromTimeShown.textContent = d && !isNaN(d.getTime()) ? `local ${localTime(d)} (${timeZone()}) = ${d.toISOString()}` : "";
  };
  fromTime.addEventListener("input", () => {
    if (fromTime.value === "") return;
    const d = new Date(fromTime.value); // a datetime-local value is local time
    if (isNaN(d.getTime())) return;
    from.value = `@${d.toISOString()}`;
    showFromTime();
  });
  from.addEventListener("input", showFromTime);
  const to = h("input", { id: "to", value: query.get("to") ?? "end", placeholder: "empty: follow live" });
  const parts = h("input", { id: "partitions", value: query.get("partitions") ?? "", placeholder: "all, or 0,2" });
  const plugin = h("input", { id: "plugin", list: "plugins", value: query.get("plugin") ?? "", placeholder: "none, or NAME[@VERSION]" });
  const file = h("input", { id: "filter-file", type: "file", accept: ".wasm" });
  const config = h("input", { id: "config", value: query.get("config") ?? "", placeholder: '{"prefix":"user-1"}' });
  const topics = h("datalist", { id: "topics" });
  const plugins = h("datalist", { id: "plugins" });
  const start = h("button", { id: "start", type: "submit" }, "Replay");
  const pause = h("button", { id: "pause", type: "button", disabled: true }, "Pause");
  const stop = h("button", { id: "stop", type: "button", disabled: true }, "Stop");
  const copyToken = h("button", { id: "copy-token", type: "button", disabled: true }, "Copy resume token");
  const copyCli = h("button", { id: "copy-cli", type: "button" }, "Copy as CLI command");
  const copied = h("input", { id: "copied", readonly: true, hidden: true });
  const status = h("p", { id: "status", class: "status" }, "idle");
  const dropped = h("p", { id: "dropped", class: "note", hidden: true });
  const error = h("p", { id: "error", class: "error", hidden: true });
  const list = new RecordList(MAX_ROWS);
  const form = h(
    "form",
    { class: "controls" },
    field("Topic", topic),
    field("From", from),
    h("label", {}, h("span", {}, "or from a local time"), fromTime, fromTimeShown),
    field("To", to),
    field("Partitions", parts),
    field("Filter plugin", plugin),
    field("or a module file", file),
    field("Filter config", config),
    h("div", { class: "buttons" }, start, pause, stop, copyToken, copyCli),
    topics,
    plugins,
  );
  root.replaceChildren(
    h("h1", {}, "Replay"),
    form,
    copied,
    status,
    dropped,
    error,
    list.el,
  );

  showFromTime();

  // Suggestions: the topics and plugins there are.
  client.listTopics().then(
    (ts) => topics.replaceChildren(...ts.map((t) => h("option", { value: t.name }))),
    () => {},
  );
  client.listPlugins().then(
    (ps) => plugins.replaceChildren(...[...new Set(ps.map((p) => p.name))].map((n) => h("option", { value: n }))),
    () => {},
  );

  let sub: Subscription | undefined;
  let params: Params | undefined;
  let total = 0;
  let paused = false;
  let resume: (() => void) | undefined;

  const params0 = async (): Promise<Params> => {
    const p: Params = {
      topic: topic.value.trim(),
      from: from.value.trim() || "earliest",
      to: to.value.trim(),
      partitions: parsePartitions(parts.value),
      plugin: plugin.value.trim(),
      config: config.value,
    };
    if (p.topic === "") throw new Error("name a topic");
    const f = file.files?.[0];
    if (f) {
      if (p.plugin !== "") throw new Error("choose a filter plugin or a module file, not both");
      p.file = { name: f.name, module: new Uint8Array(await f.arrayBuffer()) };
    }
    return p;
  };

  const note = (): void => {
    dropped.hidden = list.dropped === 0;
    dropped.textContent = `${list.dropped} older records were dropped from the view; at most ${MAX_ROWS} are kept.`;
  };
  const setStatus = (s: string): void => {
    status.textContent = s;
    status.dataset.state = s.split(":")[0];
  };

  const run = async (p: Params): Promise<void> => {
    const s = client.replay(p.topic, {
      from: p.from,
      to: p.to === "" ? undefined : p.to,
      partitions: p.partitions,
      filter: p.file ? { module: p.file.module, config: p.config } : p.plugin === "" ? undefined : { plugin: p.plugin, config: p.config },
    });
    sub = s;
    setStatus("opening");
    try {
      for await (const ev of s) {
        if (paused) await new Promise<void>((r) => (resume = r));
        switch (ev.kind) {
          case "started":
            setStatus(p.to === "" ? "streaming: following live" : "streaming");
            copyToken.disabled = false;
            break;
          case "records":
            list.add(ev.records);
            total += ev.records.length;
            note();
            break;
          case "caughtUp":
            if (p.to === "") setStatus("live: caught up, following");
            break;
          case "disconnected":
            setStatus(`reconnecting: ${errorText(ev.error)}`);
            break;
          case "reconnected":
            setStatus("streaming");
            break;
        }
      }
      if (sub === s) setStatus(`done: ${plural(total, "record")}`);
    } catch (e) {
      if (sub !== s) return; // stopped
      setStatus("error");
      error.textContent = errorText(e);
      error.hidden = false;
    } finally {
      list.flush();
      note();
      if (sub === s) {
        pause.disabled = stop.disabled = true;
        start.disabled = false;
      }
    }
  };

  const halt = (): void => {
    const s = sub;
    sub = undefined;
    s?.close();
    resume?.();
    resume = undefined;
  };

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    halt();
    error.hidden = true;
    params0().then(start0, (e: unknown) => {
      error.textContent = errorText(e);
      error.hidden = false;
    });
  });
  const start0 = (p: Params): void => {
    params = p;
    list.clear();
    note();
    total = 0;
    paused = false;
    pause.textContent = "Pause";
    pause.disabled = stop.disabled = false;
    copyToken.disabled = true;
    start.disabled = true;
    const q = new URLSearchParams({ topic: params.topic, from: params.from, to: params.to });
    if (params.partitions.length) q.set("partitions", params.partitions.join(","));
    if (params.plugin) q.set("plugin", params.plugin), q.set("config", params.config);
    history.replaceState(null, "", `#/replay?${q}`);
    void run(params);
  };
  pause.addEventListener("click", () => {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    if (paused) setStatus("paused");
    else {
      setStatus("streaming");
      resume?.();
      resume = undefined;
    }
  });
  stop.addEventListener("click", () => {
    const token = sub?.resumeToken;
    halt();
    setStatus(`stopped: ${plural(total, "record")}`);
    pause.disabled = stop.disabled = true;
    start.disabled = false;
    if (token) copyToken.dataset.token = token;
  });
  copyToken.addEventListener("click", () => {
    const token = sub?.resumeToken || copyToken.dataset.token || "";
    void copy(token, copied);
  });
  copyCli.addEventListener("click", () => {
    (params ? Promise.resolve(params) : params0()).then(
      (p) => copy(cliCommand(p), copied),
      (e: unknown) => {
        error.textContent = errorText(e);
        error.hidden = false;
      },
    );
  });
  if (query.get("topic") && query.get("run") === "1") form.requestSubmit();
  return halt;
}
