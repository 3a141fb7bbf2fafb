// The Plugins page: the registered plugins and their versions, an upload
// form for a .wasm module, and a test of a plugin on a range of a topic
// with what it kept, dropped or replaced.

import { CompileState, text } from "../../sdk/ts/src/index.js";
import { client, errorText, field, fmtBytes, h, parsePartitions, showError, table, ts } from "./ui.js";

/** pluginsPage renders the page into root. */
export function pluginsPage(root: HTMLElement): () => void {
  const error = h("p", { class: "error", hidden: true });
  const list = h("div", { id: "plugin-list" }, "loading…");

  const name = h("input", { id: "upload-name", required: true, placeholder: "keyprefix" });
  const file = h("input", { id: "upload-file", type: "file", accept: ".wasm", required: true });
  const desc = h("input", { id: "upload-description", placeholder: "what it does" });
  const uploadMsg = h("p", { id: "upload-result", class: "note" });
  const upload = h("form", { class: "controls" }, field("Name", name), field("Module (.wasm)", file), field("Description", desc), h("div", { class: "buttons" }, h("button", { id: "upload", type: "submit" }, "Upload")));

  const ref = h("input", { id: "test-plugin", required: true, placeholder: "NAME, NAME@VERSION or sha256:HEX" });
  const config = h("input", { id: "test-config", placeholder: '{"prefix":"user-1"}' });
  const topic = h("input", { id: "test-topic", required: true, placeholder: "orders" });
  const from = h("input", { id: "test-from", value: "earliest" });
  const parts = h("input", { id: "test-partitions", placeholder: "all, or 0,2" });
  const limit = h("input", { id: "test-limit", type: "number", value: "100", min: "1", max: "10000" });
  const testOut = h("div", { id: "test-result" });
  const test = h(
    "form",
    { class: "controls" },
    field("Plugin", ref),
    field("Config", config),
    field("Topic", topic),
    field("From", from),
    field("Partitions", parts),
    field("Limit", limit),
    h("div", { class: "buttons" }, h("button", { id: "test", type: "submit" }, "Test")),
  );
  root.replaceChildren(h("h1", {}, "Plugins"), error, list, h("h2", {}, "Upload"), upload, uploadMsg, h("h2", {}, "Test on a topic"), test, testOut);
  let stopped = false;

  const load = async (): Promise<void> => {
    try {
      const ps = await client.listPlugins();
      if (stopped) return;
      list.replaceChildren(
        ps.length === 0
          ? h("p", {}, "No plugins yet.")
          : table(
              "plugins",
              ["Name", "Version", "Module", "Uploaded", "Size", "Description", "Compiled"],
              ps.map((p) => [p.name, String(p.version), h("code", {}, p.module), ts(p.uploadTime), fmtBytes(p.sizeBytes), p.description, p.compileError || (CompileState[p.compileState] ?? String(p.compileState)).toLowerCase()]),
            ),
      );
    } catch (e) {
      if (!stopped) showError(error, e);
    }
  };

  upload.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = file.files?.[0];
    if (!f) return;
    uploadMsg.textContent = "uploading…";
    f.arrayBuffer()
      .then((b) => client.uploadPlugin(name.value.trim(), new Uint8Array(b), { description: desc.value }))
      .then(
        (r) => {
          uploadMsg.textContent = r.unchanged ? `${r.plugin.name}@${r.plugin.version} is already this module.` : `Uploaded ${r.plugin.name}@${r.plugin.version} (${r.plugin.module}).`;
          void load();
        },
        (e) => (uploadMsg.textContent = `Upload failed: ${errorText(e)}`),
      );
  });

  test.addEventListener("submit", (ev) => {
    ev.preventDefault();
    testOut.replaceChildren("testing…");
    let partitions: number[];
    try {
      partitions = parsePartitions(parts.value);
    } catch (e) {
      testOut.replaceChildren(h("p", { class: "error" }, errorText(e)));
      return;
    }
    client
      .testPlugin(
        { plugin: ref.value.trim(), config: config.value },
        { topic: topic.value.trim(), from: from.value.trim() || "earliest", partitions, limit: Number(limit.value) || 100 },
      )
      .then(
        (r) =>
          testOut.replaceChildren(
            h("p", { id: "test-summary" }, `Module ${r.module}: scanned ${r.scanned}, kept ${r.kept}, emitted ${r.emitted}.`),
            r.error ? h("p", { class: "error" }, `The module failed: ${r.error.reason}`) : "",
            table(
              "test",
              ["Partition", "Offset", "Key", "Value", "Result"],
              r.results.map((t) => [
                String(t.input?.partition ?? ""),
                String(t.input?.offset ?? ""),
                text(t.input?.key ?? new Uint8Array()),
                text(t.input?.value ?? new Uint8Array()),
                t.outputs.length === 0
                  ? "dropped"
                  : t.outputs.map((o, i) => (t.replaced[i] ? `replaced: ${text(o.key)}=${text(o.value)}` : "kept")).join("; "),
              ]),
            ),
          ),
        (e) => testOut.replaceChildren(h("p", { class: "error" }, errorText(e))),
      );
  });

  void load();
  return () => {
    stopped = true;
  };
}
