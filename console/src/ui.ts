// Small DOM helpers shared by the pages, and the console's one client.

import { createClient, RewindError, type Client } from "../../sdk/ts/src/index.js";
import type { Timestamp, Duration } from "@bufbuild/protobuf/wkt";

const tokenKey = "rewind-token";

/**
 * client speaks the public API of the server that served the console (same
 * origin), with the token given in the header for a server with --auth
 * (kept in this tab's session storage only).
 */
export let client: Client = createClient({ baseUrl: location.origin, token: sessionStorage.getItem(tokenKey) ?? undefined });

/** token is the bearer token the console sends ("" for none). */
export function token(): string {
  return sessionStorage.getItem(tokenKey) ?? "";
}

/** setToken makes the console send t (a bearer token; "" for none) from now on. */
export function setToken(t: string): void {
  if (t) sessionStorage.setItem(tokenKey, t);
  else sessionStorage.removeItem(tokenKey);
  client = createClient({ baseUrl: location.origin, token: t || undefined });
}

type Child = Node | string | null | undefined | false;
type Attrs = { [k: string]: string | boolean | number | undefined | ((ev: Event) => void) };

/** h builds an element: attributes ("on*" are listeners, booleans toggle) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

/** table builds a table with a header row and body rows of cells. */
export function table(cls: string, head: string[], rows: Child[][]): HTMLTableElement {
  return h(
    "table",
    { class: cls },
    h("thead", {}, h("tr", {}, ...head.map((c) => h("th", {}, c)))),
    h("tbody", {}, ...rows.map((r) => h("tr", {}, ...r.map((c) => h("td", {}, c))))),
  );
}

/** field is a labelled input. */
export function field(label: string, input: HTMLElement): HTMLLabelElement {
  return h("label", {}, h("span", {}, label), input);
}

/** errorText is what the console shows for a failed call. */
export function errorText(e: unknown): string {
  if (e instanceof RewindError) return `${e.message}`;
  return e instanceof Error ? e.message : String(e);
}

/** showError puts an error into box (empties it for undefined). */
export function showError(box: HTMLElement, e: unknown): void {
  box.textContent = e === undefined ? "" : errorText(e);
  box.hidden = e === undefined;
}

/** ts formats a protobuf timestamp (RFC 3339, milliseconds), "" when unset. */
export function ts(t: Timestamp | undefined): string {
  if (!t) return "";
  return new Date(Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6)).toISOString();
}

/** dur formats a protobuf duration ("" when unset or zero). */
export function dur(d: Duration | undefined): string {
  if (!d) return "";
  const ms = Number(d.seconds) * 1000 + d.nanos / 1e6;
  return ms === 0 ? "" : fmtMs(ms);
}

/** durSeconds is a protobuf duration in seconds (0 when unset). */
export function durSeconds(d: Duration | undefined): number {
  return d ? Number(d.seconds) + d.nanos / 1e9 : 0;
}

/** fmtMs formats milliseconds as 1d2h3m4.5s. */
export function fmtMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  let s = ms / 1000;
  const parts: string[] = [];
  for (const [unit, n] of [["d", 86400], ["h", 3600], ["m", 60]] as const) {
    if (s >= n) {
      parts.push(`${Math.floor(s / n)}${unit}`);
      s %= n;
    }
  }
  if (s > 0) parts.push(`${Number.isInteger(s) ? s : s.toFixed(1)}s`);
  return parts.join("");
}

/** plural is "1 partition", "2 partitions": n and the noun it counts. */
export function plural(n: bigint | number, one: string, many = `${one}s`): string {
  return `${n} ${Number(n) === 1 ? one : many}`;
}

/** fmtBytes formats a byte count (KiB, MiB, GiB). */
export function fmtBytes(n: bigint | number): string {
  let v = Number(n);
  for (const unit of ["B", "KiB", "MiB", "GiB"]) {
    if (v < 1024 || unit === "GiB") return unit === "B" ? `${v} B` : `${v.toFixed(1)} ${unit}`;
    v /= 1024;
  }
  return `${v}`;
}

/** parsePartitions parses "0,2,3" ("" is every partition). */
export function parsePartitions(s: string): number[] {
  const out: number[] = [];
  for (const part of s.split(",")) {
    const t = part.trim();
    if (t === "") continue;
    if (!/^\d+$/.test(t)) throw new Error(`partition ${JSON.stringify(t)}: want numbers separated by commas`);
    out.push(Number(t));
  }
  return out;
}

/** shellQuote quotes s for a POSIX shell when it needs it. */
export function shellQuote(s: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s)) return s;
  return `'${s.replaceAll("'", `'"'"'`)}'`;
}

/** copy puts text on the clipboard and into out (which a user can also select). */
export async function copy(text: string, out: HTMLInputElement): Promise<void> {
  out.value = text;
  out.hidden = false;
  out.select();
  try {
    await navigator.clipboard.writeText(text);
    out.title = "copied to the clipboard";
  } catch {
    out.title = "select and copy";
  }
}
