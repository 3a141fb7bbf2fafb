// The browser test's page (bundled by esbuild, loaded in headless Chromium
// from an origin other than the server's): it replays a topic through the
// client of "@rewind-io/client" over the protocol the URL names, shows the
// records as rows, and posts the rows it shows (read back from the DOM)
// to its own origin's /result.
//
// URL: /index.html?server=http://127.0.0.1:PORT&topic=NAME&protocol=connect|grpc-web&from=POSITION

import { createClient, text, type Protocol } from "../src/index.js";

const q = new URLSearchParams(location.search);
const out = document.getElementById("records")!;
const status = document.getElementById("status")!;

async function run(): Promise<void> {
  const client = createClient({ baseUrl: q.get("server")!, transport: q.get("protocol") as Protocol });
  const sub = client.replay(q.get("topic")!, { from: q.get("from") ?? "earliest", to: "end" });
  for await (const ev of sub) {
    if (ev.kind !== "records") continue;
    for (const r of ev.records) {
      const li = document.createElement("li");
      li.dataset.partition = String(r.partition);
      li.dataset.offset = String(r.offset);
      li.textContent = `${text(r.key)}=${text(r.value)}`;
      out.append(li);
    }
  }
  status.textContent = "done";
}

async function report(error: string): Promise<void> {
  const rows = [...out.querySelectorAll("li")].map((li) => ({
    partition: Number(li.dataset.partition),
    offset: Number(li.dataset.offset),
    text: li.textContent,
  }));
  await fetch("/result", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ protocol: q.get("protocol"), status: status.textContent, error, rows }),
  });
}

run().then(
  () => report(""),
  (e: unknown) => {
    status.textContent = "error";
    return report(String(e));
  },
);
