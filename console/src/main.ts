// Rewind's web console: a page per hash route (#/replay, #/search,
// #/topics, #/topic, #/groups, #/plugins, #/cluster, #/users, #/acls,
// #/quotas), each built on the TypeScript client
// (../sdk/ts/src) and speaking only the public API of the server that
// served it.

import { aclsPage, quotasPage, usersPage } from "./access.js";
import { clusterPage } from "./cluster.js";
import { groupsPage } from "./groups.js";
import { pluginsPage } from "./plugins.js";
import { replayPage } from "./replay.js";
import { searchPage } from "./search.js";
import { topicPage } from "./topic.js";
import { topicsPage } from "./topics.js";
import { setToken, token } from "./ui.js";

type Page = (root: HTMLElement, query: URLSearchParams) => () => void;

const pages: { [name: string]: Page } = {
  replay: replayPage,
  search: searchPage,
  topics: topicsPage,
  topic: topicPage,
  groups: groupsPage,
  plugins: pluginsPage,
  cluster: clusterPage,
  users: usersPage,
  acls: aclsPage,
  quotas: quotasPage,
};

let leave: (() => void) | undefined;
let current = "";

/** route shows the page the hash names (default Replay). */
function route(): void {
  const hash = location.hash.replace(/^#\/?/, "");
  const [name0, q = ""] = hash.split("?", 2);
  const name = name0 in pages ? name0 : "replay";
  const key = `${name}?${q}`;
  if (key === current) return;
  current = key;
  leave?.();
  const root = document.getElementById("page")!;
  document.body.dataset.page = name;
  const navPage = name === "topic" ? "topics" : name;
  for (const a of document.querySelectorAll<HTMLAnchorElement>("nav a")) a.classList.toggle("active", a.dataset.page === navPage);
  leave = pages[name](root, new URLSearchParams(q));
}

// The token field: a server with --auth needs one (rewind user create).
const tokenInput = document.getElementById("token") as HTMLInputElement;
tokenInput.value = token();
tokenInput.addEventListener("change", () => {
  setToken(tokenInput.value.trim());
  current = ""; // show the page again with the new credentials
  route();
});

window.addEventListener("hashchange", route);
route();
