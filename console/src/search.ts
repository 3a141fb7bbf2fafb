// The Search page: the event store's reads (EventStoreService.Read). A
// key's history: its records with their versions and offsets, oldest or
// newest first, from a version. Or the records whose type and tags match:
// in one partition, or in each partition of the topic (a query is a
// partition's; "all" runs one per partition and shows them together).
// Reads are bounded (a limit per read, at most 10,000); "More" continues
// after the last row shown.

import { recordTags, recordType, text, type Query, type ReadOptions, type ReadResult, type Record } from "../../sdk/ts/src/index.js";
import { pretty } from "./recordlist.js";
import { client, errorText, field, h, plural, table } from "./ui.js";

/** DEFAULT_LIMIT is the records one read returns unless the limit field says otherwise. */
const DEFAULT_LIMIT = 100;

/** splitList parses "a, b ,c" into ["a", "b", "c"]. */
export function splitList(s: string): string[] {
  return s
    .split(",")
    .map((x) => x.trim())
    .filter((x) => x !== "");
}

/** What a search asks for (also the page's URL). */
interface Params {
  topic: string;
  mode: "key" | "tags";
  key: string;
  types: string[];
  tags: string[];
  /** undefined: the key's partition, or every partition for tags. */
  partition?: number;
  fromVersion?: bigint;
  backward: boolean;
  limit: number;
}

/** searchPage renders the page into root; the returned function stops it. */
export function searchPage(root: HTMLElement, query: URLSearchParams): () => void {
  const topic = h("input", { id: "search-topic", required: true, list: "search-topics", value: query.get("topic") ?? "", placeholder: "accounts" });
  const key = h("input", { id: "search-key", value: query.get("key") ?? "", placeholder: "account-1" });
  const fromVersion = h("input", { id: "search-from-version", value: query.get("fromVersion") ?? "", placeholder: "0, or the newest going backward", inputmode: "numeric" });
  const types = h("input", { id: "search-types", value: query.get("types") ?? "", placeholder: "SeatBooked, CourseCreated" });
  const tags = h("input", { id: "search-tags", value: query.get("tags") ?? "", placeholder: "course:42, student:7" });
  const partition = h("select", { id: "search-partition" }, h("option", { value: "" }, "any"));
  const partField = field("Partition", partition);
  partField.hidden = true;
  const backward = h("input", { id: "search-backward", type: "checkbox", checked: query.get("backward") === "1" });
  const limit = h("input", { id: "search-limit", type: "number", min: 1, max: 10000, value: query.get("limit") ?? String(DEFAULT_LIMIT) });
  const topics = h("datalist", { id: "search-topics" });
  const byKey = h("button", { id: "search-key-go", type: "submit", value: "key" }, "Key history");
  const byTags = h("button", { id: "search-tags-go", type: "submit", value: "tags" }, "Find by type and tags");
  const status = h("p", { id: "search-status", class: "status" }, "Type a key, or types and tags.");
  const error = h("p", { id: "search-error", class: "error", hidden: true });
  const results = h("div", { id: "search-results" });
  const more = h("button", { id: "search-more", type: "button", hidden: true }, "More");
  const detail = h("div", { id: "search-detail", class: "rec-detail", hidden: true });
  const form = h(
    "form",
    { class: "controls" },
    field("Topic", topic),
    partField,
    h("fieldset", { class: "group" }, h("legend", {}, "By key"), field("Key", key), field("From version", fromVersion), h("div", { class: "buttons" }, byKey)),
    h("fieldset", { class: "group" }, h("legend", {}, "By type and tag"), field("Types", types), field("Tags (all of)", tags), h("div", { class: "buttons" }, byTags)),
    h("label", { class: "check" }, backward, h("span", {}, "Newest first")),
    field("Limit", limit),
    topics,
  );
  root.replaceChildren(h("h1", {}, "Search"), form, status, error, results, more, detail);

  let stopped = false;
  let seq = 0; // the current search; answers of an older one are dropped
  let shown: Record[] = [];
  let last: Params | undefined;

  client.listTopics().then(
    (ts) => topics.replaceChildren(...ts.map((t) => h("option", { value: t.name }))),
    () => {},
  );

  // The partition selector: shown for a topic of several partitions.
  let described = "";
  let wantPartition = query.get("partition") ?? ""; // the URL's, for the first topic shown
  const describe = async (): Promise<void> => {
    const name = topic.value.trim();
    if (name === described) return;
    described = name;
    let n = 0;
    try {
      n = name === "" ? 0 : (await client.describeTopic(name)).partitions.length;
    } catch {
      /* an unknown topic: the search says so */
    }
    if (stopped || described !== name) return;
    const want = wantPartition || partition.value;
    wantPartition = "";
    partition.replaceChildren(h("option", { value: "" }, "any"), ...Array.from({ length: n }, (_, p) => h("option", { value: String(p) }, String(p))));
    partition.value = Number(want) < n ? want : "";
    partField.hidden = n <= 1;
    partition.dataset.partitions = String(n);
  };
  topic.addEventListener("change", () => void describe());

  const params = (mode: "key" | "tags"): Params => {
    const p: Params = {
      topic: topic.value.trim(),
      mode,
      key: key.value,
      types: splitList(types.value),
      tags: splitList(tags.value),
      partition: partition.value === "" || partField.hidden ? undefined : Number(partition.value),
      backward: backward.checked,
      limit: Number(limit.value) || DEFAULT_LIMIT,
    };
    if (p.topic === "") throw new Error("name a topic");
    if (!Number.isInteger(p.limit) || p.limit < 1 || p.limit > 10000) throw new Error("the limit is 1 to 10000");
    if (mode === "key") {
      if (p.key === "") throw new Error("type a key");
      const v = fromVersion.value.trim();
      if (v !== "") {
        if (!/^\d+$/.test(v)) throw new Error(`from version ${JSON.stringify(v)}: want a number`);
        p.fromVersion = BigInt(v);
      }
    } else if (p.types.length === 0 && p.tags.length === 0) {
      throw new Error("type a type or a tag");
    }
    return p;
  };

  // read runs the search p, continuing after the record after (More).
  const read = async (p: Params, after?: Record): Promise<{ partitions: ReadResult[]; more: boolean }> => {
    const opts: ReadOptions = { backward: p.backward, limit: p.limit, partition: p.partition };
    if (p.mode === "key") {
      if (after?.keyVersion !== undefined) opts.fromVersion = p.backward ? after.keyVersion - 1n : after.keyVersion + 1n;
      else if (p.fromVersion !== undefined) opts.fromVersion = p.fromVersion;
      const r = await client.readKey(p.topic, p.key, opts);
      return { partitions: [r], more: r.more };
    }
    const q: Query = { types: p.types, tags: p.tags };
    if (after) opts.fromOffset = p.backward ? after.offset - 1n : after.offset + 1n;
    if (p.partition !== undefined) {
      const r = await client.query(p.topic, q, opts);
      return { partitions: [r], more: r.more };
    }
    // Every partition: one read each, shown together by append time.
    const n = Number(partition.dataset.partitions ?? "1") || 1;
    const rs = await Promise.all(Array.from({ length: n }, (_, i) => client.query(p.topic, q, { ...opts, partition: i })));
    return { partitions: rs, more: false };
  };

  const render = (p: Params, rs: ReadResult[], moreLeft: boolean): void => {
    const rows = p.mode === "tags" && rs.length > 1 ? [...shown].sort((a, b) => cmpTime(a, b) * (p.backward ? -1 : 1)) : shown;
    const head = p.mode === "key" ? ["Version", "Partition", "Offset", "Type", "Tags", "Value", "Append time"] : ["Partition", "Offset", "Key", "Version", "Type", "Tags", "Value", "Append time"];
    const t = table(
      "search-results",
      head,
      rows.map((r) => {
        const value = text(r.value);
        const v = h("span", { class: "value", title: value.length > 2000 ? value.slice(0, 2000) + "…" : value }, value);
        const cells = [String(r.partition), String(r.offset)];
        return p.mode === "key"
          ? [String(r.keyVersion ?? ""), ...cells, recordType(r) ?? "", recordTags(r).join(", "), v, r.appendTime.toISOString()]
          : [...cells, text(r.key), String(r.keyVersion ?? ""), recordType(r) ?? "", recordTags(r).join(", "), v, r.appendTime.toISOString()];
      }),
    );
    const body = t.tBodies[0];
    rows.forEach((r, i) => {
      const tr = body.rows[i];
      tr.dataset.partition = String(r.partition);
      tr.dataset.offset = String(r.offset);
      if (r.keyVersion !== undefined) tr.dataset.version = String(r.keyVersion);
      tr.addEventListener("click", () => showDetail(r, tr));
    });
    results.replaceChildren(rows.length ? t : h("p", { class: "note" }, "No records match."));
    more.hidden = !moreLeft;
    const r0 = rs[0];
    if (p.mode === "key") {
      const versions = r0.head === undefined ? "the key has no record" : `versions ${r0.earliest ?? 0n} to ${r0.head} held`;
      setStatus(`done: ${plural(rows.length, "record")} of key ${JSON.stringify(p.key)} in partition ${r0.partition}; ${versions}`);
    } else {
      const where = rs.map((r) => `partition ${r.partition}${r.position !== undefined ? ` (position ${r.position})` : " (empty)"}`).join(", ");
      const cut = rs.length > 1 && rs.some((r) => r.more) ? "; some partitions have more: pick one to page" : "";
      setStatus(`done: ${plural(rows.length, "record")} in ${where}${cut}`);
    }
  };

  const setStatus = (s: string): void => {
    status.textContent = s;
    status.dataset.state = s.split(":")[0];
  };

  const showDetail = (r: Record, tr: HTMLTableRowElement): void => {
    for (const x of results.querySelectorAll("tr.selected")) x.classList.remove("selected");
    tr.classList.add("selected");
    detail.hidden = false;
    detail.replaceChildren(
      h("h3", {}, `Partition ${r.partition}, offset ${r.offset}${r.keyVersion !== undefined ? `, version ${r.keyVersion}` : ""}`),
      h(
        "dl",
        {},
        h("dt", {}, "Key"),
        h("dd", {}, text(r.key)),
        h("dt", {}, "Message ID"),
        h("dd", {}, r.messageId),
        h("dt", {}, "Headers"),
        h("dd", {}, ...r.headers.map((hd) => h("div", {}, `${hd.key}: ${text(hd.value)}`))),
      ),
      h("pre", { id: "search-detail-value" }, pretty(r.value)),
    );
  };

  const run = async (p: Params, append: boolean): Promise<void> => {
    const my = ++seq;
    error.hidden = true;
    setStatus("searching");
    byKey.disabled = byTags.disabled = more.disabled = true;
    try {
      const after = append ? shown[shown.length - 1] : undefined;
      const res = await read(p, after);
      if (stopped || my !== seq) return;
      const got = res.partitions.flatMap((r) => r.records);
      shown = append ? [...shown, ...got] : got;
      if (!append) detail.hidden = true;
      render(p, res.partitions, res.more);
    } catch (e) {
      if (stopped || my !== seq) return;
      setStatus("error");
      error.textContent = errorText(e);
      error.hidden = false;
    } finally {
      if (my === seq) byKey.disabled = byTags.disabled = more.disabled = false;
    }
  };

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const mode = (ev.submitter as HTMLButtonElement | null)?.value === "tags" ? "tags" : "key";
    setStatus("searching");
    // The partitions of the topic typed, before the partition is read.
    void describe().then(() => submit(mode));
  });
  const submit = (mode: "key" | "tags"): void => {
    if (stopped) return;
    let p: Params;
    try {
      p = params(mode);
    } catch (e) {
      error.textContent = errorText(e);
      error.hidden = false;
      return;
    }
    last = p;
    const q = new URLSearchParams({ topic: p.topic, mode });
    if (mode === "key") {
      q.set("key", p.key);
      if (p.fromVersion !== undefined) q.set("fromVersion", String(p.fromVersion));
    } else {
      if (p.types.length) q.set("types", p.types.join(","));
      if (p.tags.length) q.set("tags", p.tags.join(","));
    }
    if (p.partition !== undefined) q.set("partition", String(p.partition));
    if (p.backward) q.set("backward", "1");
    if (p.limit !== DEFAULT_LIMIT) q.set("limit", String(p.limit));
    history.replaceState(null, "", `#/search?${q}`);
    void run(p, false);
  };
  more.addEventListener("click", () => {
    if (last) void run(last, true);
  });

  void describe().then(() => {
    const mode = query.get("mode");
    if (!stopped && query.get("topic") && (mode === "key" || mode === "tags")) form.requestSubmit(mode === "key" ? byKey : byTags);
  });
  return () => {
    stopped = true;
  };
}

function cmpTime(a: Record, b: Record): number {
  return a.appendTimeUnixNanos < b.appendTimeUnixNanos ? -1 : a.appendTimeUnixNanos > b.appendTimeUnixNanos ? 1 : a.partition - b.partition;
}
