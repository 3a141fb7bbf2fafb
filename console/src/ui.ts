// Small DOM helpers shared by the pages, and the console's one client.

import { createClient as createConnectClient, type Client as ConnectClient, type Interceptor } from "@connectrpc/connect";
import { createClient, formatGoDuration, RewindError, webTransport, type Client } from "../../sdk/ts/src/index.js";
import { AuthService } from "../../sdk/ts/src/gen/rewind/v1/auth_pb.js";
import { TopicService } from "../../sdk/ts/src/gen/rewind/v1/topic_pb.js";
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
  adminClients = undefined;
}

/**
 * The services the client does not wrap (the principals, ACLs and quotas
 * of AuthService, and AlterTopic's partition growth), called directly on
 * the same origin with the same token.
 */
export interface AdminClients {
  auth: ConnectClient<typeof AuthService>;
  topics: ConnectClient<typeof TopicService>;
}

let adminClients: AdminClients | undefined;

/** admin returns the direct service clients for the current token. */
export function admin(): AdminClients {
  if (!adminClients) {
    const interceptors: Interceptor[] = [];
    const t = token();
    if (t) {
      interceptors.push((next) => (req) => {
        req.header.set("Authorization", `Bearer ${t}`);
        return next(req);
      });
    }
    const transport = webTransport("connect", location.origin, interceptors);
    adminClients = { auth: createConnectClient(AuthService, transport), topics: createConnectClient(TopicService, transport) };
  }
  return adminClients;
}

/** utf8 decodes b as UTF-8, or gives undefined when b is not valid UTF-8. */
export function utf8(b: Uint8Array): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(b);
  } catch {
    return undefined;
  }
}

/** hex is b as space-separated hex bytes ("00 ff 10"). */
export function hex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(" ");
}

/** base64 is b in standard base64 with padding. */
export function base64(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s);
}

/** shown is bytes as one line: the text when it is UTF-8, else "hex 00 ff …". */
export function shown(b: Uint8Array): string {
  return utf8(b) ?? `hex ${hex(b)}`;
}

/**
 * confirmButton is a danger button that asks first: a click shows what
 * will happen and a second button that does it (no browser dialog, so the
 * console stays scriptable and works where dialogs are blocked).
 */
export function confirmButton(id: string, label: string, question: string, act: () => Promise<void>, onError: (e: unknown) => void): HTMLElement {
  const ask = h("button", { id, type: "button", class: "danger" }, label);
  const yes = h("button", { id: `${id}-confirm`, type: "button", class: "danger" }, `Yes, ${label.toLowerCase()}`);
  const no = h("button", { id: `${id}-cancel`, type: "button" }, "Cancel");
  const box = h("span", { class: "confirm", hidden: true }, h("span", { class: "question" }, question), yes, no);
  ask.addEventListener("click", () => ((box.hidden = false), (ask.hidden = true)));
  no.addEventListener("click", () => ((box.hidden = true), (ask.hidden = false)));
  yes.addEventListener("click", () => {
    yes.disabled = true;
    act().then(
      () => ((box.hidden = true), (ask.hidden = false), (yes.disabled = false)),
      (e: unknown) => ((yes.disabled = false), onError(e)),
    );
  });
  return h("span", { class: "confirm-wrap" }, ask, box);
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

/** localTime is d in the browser's time zone, as a datetime-local value shows it ("2026-12-07 14:53:02.123"). */
export function localTime(d: Date): string {
  const p = (n: number, w = 2): string => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

/** timeZone names the browser's time zone and its offset now ("Europe/Paris, UTC+01:00"). */
export function timeZone(d = new Date()): string {
  const off = -d.getTimezoneOffset();
  const a = Math.abs(off);
  const utc = `UTC${off < 0 ? "-" : "+"}${String(Math.floor(a / 60)).padStart(2, "0")}:${String(a % 60).padStart(2, "0")}`;
  return `${Intl.DateTimeFormat().resolvedOptions().timeZone}, ${utc}`;
}

/** formatDuration is a protobuf duration as Go writes it ("168h0m0s"), which the duration fields accept back. */
export function formatDuration(d: Duration): string {
  return formatGoDuration(d.seconds * 1_000_000_000n + BigInt(d.nanos));
}
