// RecordList is the Replay page's virtualised list: it keeps at most max
// records (dropping the oldest), and the DOM holds only the rows in view
// (rows have a fixed height), so a long or live replay stays responsive.
// A click on a row shows the record in full below the list: its value
// pretty-printed when it is JSON, and its headers.

import type { Record } from "../../sdk/ts/src/index.js";
import { base64, h, hex, shown, utf8 } from "./ui.js";

/** ROW_HEIGHT is a row's height in pixels; console.css says the same (.rec). */
const ROW_HEIGHT = 26;
/** OVERSCAN rows are rendered above and below the view. */
const OVERSCAN = 10;

const COLUMNS = ["Partition", "Offset", "Key", "Value", "Headers", "Message ID", "Append time"];

/** pretty is a value as text, indented when it is JSON. */
export function pretty(v: Uint8Array): string {
  const s = utf8(v);
  if (s === undefined) return hex(v);
  const t = s.trim();
  if (t.startsWith("{") || t.startsWith("[")) {
    try {
      return JSON.stringify(JSON.parse(t), null, 2);
    } catch {
      /* not JSON */
    }
  }
  return s;
}

function headersText(r: Record): string {
  return r.headers.map((hd) => `${hd.key}=${shown(hd.value)}`).join(" ");
}

export class RecordList {
  /** el is the list's element: the column heads, the scrolling rows, and the selected record. */
  readonly el: HTMLElement;
  readonly #max: number;
  #rows: Record[] = [];
  #dropped = 0;
  #selected: Record | undefined;
  #frame = 0;
  #stick = true; // keep the newest rows in view while the user is at the bottom
  readonly #viewport: HTMLElement;
  readonly #spacer: HTMLElement;
  readonly #window: HTMLElement;
  readonly #detail: HTMLElement;

  constructor(max: number) {
    this.#max = max;
    this.#window = h("div", { id: "records", class: "rec-window" });
    this.#spacer = h("div", { class: "rec-spacer" }, this.#window);
    this.#viewport = h("div", { id: "viewport", class: "rec-viewport", tabindex: 0 }, this.#spacer);
    this.#detail = h("div", { id: "detail", class: "rec-detail", hidden: true });
    this.el = h(
      "div",
      { class: "rec-list" },
      h("div", { class: "rec rec-head" }, ...COLUMNS.map((c) => h("span", {}, c))),
      this.#viewport,
      this.#detail,
    );
    this.#viewport.addEventListener("scroll", () => {
      const v = this.#viewport;
      this.#stick = v.scrollTop + v.clientHeight >= v.scrollHeight - ROW_HEIGHT;
      this.#schedule();
    });
    this.#window.addEventListener("click", (ev) => {
      const row = (ev.target as HTMLElement).closest<HTMLElement>(".rec");
      if (!row) return;
      this.#selected = this.#rows[Number(row.dataset.index)];
      this.#showDetail();
      this.#schedule();
    });
  }

  /** length is the number of records kept. */
  get length(): number {
    return this.#rows.length;
  }

  /** dropped is the number of records dropped to keep at most max. */
  get dropped(): number {
    return this.#dropped;
  }

  /** add appends records, dropping the oldest beyond max. */
  add(records: Record[]): void {
    for (const r of records) this.#rows.push(r);
    const excess = this.#rows.length - this.#max;
    if (excess > 0) {
      this.#rows.splice(0, excess);
      this.#dropped += excess;
    }
    this.#schedule();
  }

  /** clear empties the list. */
  clear(): void {
    this.#rows = [];
    this.#dropped = 0;
    this.#selected = undefined;
    this.#stick = true;
    this.#detail.hidden = true;
    this.#schedule();
  }

  /** flush renders now (instead of at the next animation frame). */
  flush(): void {
    if (this.#frame !== 0) cancelAnimationFrame(this.#frame);
    this.#frame = 0;
    this.#render();
  }

  #schedule(): void {
    if (this.#frame === 0) this.#frame = requestAnimationFrame(() => this.flush());
  }

  #render(): void {
    const v = this.#viewport;
    this.#spacer.style.height = `${this.#rows.length * ROW_HEIGHT}px`;
    if (this.#stick) v.scrollTop = v.scrollHeight;
    const first = Math.max(0, Math.floor(v.scrollTop / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(this.#rows.length, Math.ceil((v.scrollTop + v.clientHeight) / ROW_HEIGHT) + OVERSCAN);
    this.#window.style.transform = `translateY(${first * ROW_HEIGHT}px)`;
    const frag = document.createDocumentFragment();
    for (let i = first; i < last; i++) frag.append(this.#row(i));
    this.#window.replaceChildren(frag);
    this.#viewport.dataset.count = String(this.#rows.length);
  }

  #row(i: number): HTMLElement {
    const r = this.#rows[i];
    const value = shown(r.value);
    const key = shown(r.key);
    return h(
      "div",
      { class: r === this.#selected ? "rec selected" : "rec", "data-index": i, "data-partition": r.partition, "data-offset": String(r.offset) },
      h("span", { class: "num" }, String(r.partition)),
      h("span", { class: "num" }, String(r.offset)),
      h("span", { class: "key", title: key }, key),
      h("span", { class: "value", title: value.length > 2000 ? value.slice(0, 2000) + "…" : value }, value),
      h("span", { class: "headers" }, headersText(r)),
      h("span", { class: "id" }, r.messageId),
      h("span", { class: "time" }, r.appendTime.toISOString()),
    );
  }

  #showDetail(): void {
    const r = this.#selected;
    if (!r) return;
    this.#detail.hidden = false;
    this.#detail.replaceChildren(
      h("h3", {}, `Partition ${r.partition}, offset ${r.offset}`),
      h(
        "dl",
        {},
        h("dt", {}, "Key"),
        h("dd", { id: "detail-key" }, shown(r.key)),
        h("dt", {}, "Message ID"),
        h("dd", {}, r.messageId),
        h("dt", {}, "Append time"),
        h("dd", {}, r.appendTime.toISOString()),
        r.eventTime ? h("dt", {}, "Event time") : null,
        r.eventTime ? h("dd", {}, r.eventTime.toISOString()) : null,
        r.idempotencyKey ? h("dt", {}, "Idempotency key") : null,
        r.idempotencyKey ? h("dd", {}, r.idempotencyKey) : null,
        h("dt", {}, "Headers"),
        h("dd", { id: "detail-headers" }, ...r.headers.map((hd) => h("div", {}, `${hd.key}: ${shown(hd.value)}`))),
      ),
      ...valueViews(r.value),
    );
  }
}

/**
 * valueViews shows a value: as text (indented JSON) when it is UTF-8, with
 * its hex and base64 a click away; a value that is not UTF-8 (protobuf,
 * compressed, encrypted bytes) as hex and base64 at once.
 */
export function valueViews(v: Uint8Array): HTMLElement[] {
  const hexView = h("pre", { id: "detail-value-hex", class: "bytes" }, hex(v));
  const b64View = h("pre", { id: "detail-value-base64", class: "bytes" }, base64(v));
  if (utf8(v) === undefined) {
    return [
      h("p", { id: "detail-binary", class: "note" }, `The value is not UTF-8 (${v.length} bytes): hex, then base64.`),
      h("pre", { id: "detail-value", hidden: true }, pretty(v)),
      hexView,
      b64View,
    ];
  }
  return [h("pre", { id: "detail-value" }, pretty(v)), h("details", { class: "bytes" }, h("summary", {}, "Hex and base64"), hexView, b64View)];
}
