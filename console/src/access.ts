// The Users, ACLs and Quotas pages: who may call the server (bearer
// tokens of principals), what each may do (ACL rules), and how much
// (quotas), through AuthService. They need a server with --auth and a
// token with the cluster admin right; otherwise they show the API's
// refusal. Deleting asks first.

import { create } from "@bufbuild/protobuf";
import { durationProto } from "../../sdk/ts/src/client.js";
import { AclRuleSchema, QuotaSchema, type Quota } from "../../sdk/ts/src/gen/rewind/v1/auth_pb.js";
import { admin, confirmButton, errorText, field, fmtBytes, fmtMs, h, showError, table, ts } from "./ui.js";

/** page builds a page's frame: a heading, a form, its result, an error line and a list. */
function frame(root: HTMLElement, title: string, intro: string, form: HTMLFormElement, result: HTMLElement) {
  const error = h("p", { class: "error", hidden: true });
  const formError = h("p", { class: "error form-error", hidden: true });
  const list = h("div", { class: "access-list" }, "loading…");
  root.replaceChildren(h("h1", {}, title), h("p", { class: "note" }, intro), form, formError, result, error, list);
  return { error, formError, list };
}

/** usersPage: the tokens, a form that issues one (shown once), Revoke. */
export function usersPage(root: HTMLElement): () => void {
  const name = h("input", { id: "user-name", required: true, placeholder: "billing-service" });
  const expires = h("input", { id: "user-expires", placeholder: "never, or 30d" });
  const form = h("form", { class: "controls", id: "user-form" }, field("Principal", name), field("Expires in", expires), h("div", { class: "buttons" }, h("button", { id: "user-create", type: "submit" }, "Create token")));
  const result = h("div", { id: "user-result" });
  const { error, formError, list } = frame(root, "Users", "Principals and their bearer tokens (never the secrets; a new token is shown once).", form, result);
  let stopped = false;
  const load = async (): Promise<void> => {
    try {
      const { users } = await admin().auth.listUsers({});
      if (stopped) return;
      showError(error, undefined);
      list.replaceChildren(
        table(
          "users",
          ["Principal", "Token ID", "Created", "Expires", "", ""],
          users.map((u) => [
            u.principal,
            u.tokenId,
            ts(u.createTime),
            u.expireTime ? ts(u.expireTime) : "never",
            [u.superuser ? "superuser" : "", u.expired ? "expired" : ""].filter((x) => x).join(", "),
            confirmButton(
              `revoke-${u.tokenId}`,
              "Revoke",
              `Revoke token ${u.tokenId} of ${u.principal}?`,
              async () => {
                await admin().auth.revokeUser({ nameOrTokenId: u.tokenId });
                await load();
              },
              (e) => showError(error, errorText(e)),
            ),
          ]),
        ),
      );
      for (const [i, tr] of [...list.querySelectorAll("table.users tbody tr")].entries()) (tr as HTMLElement).dataset.token = users[i].tokenId;
    } catch (e) {
      if (!stopped) showError(error, errorText(e));
    }
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    showError(formError, undefined);
    let expiresIn;
    try {
      expiresIn = expires.value.trim() ? durationProto(expires.value.trim()) : undefined;
    } catch (e) {
      showError(formError, e);
      return;
    }
    admin()
      .auth.createUser({ name: name.value.trim(), expiresIn })
      .then(
        (r) => {
          const tok = h("input", { id: "user-token", readonly: true, value: r.token });
          result.replaceChildren(h("p", { class: "status" }, `Token ${r.user?.tokenId} for ${r.user?.principal}: copy it now, it is not shown again.`), tok);
          void load();
        },
        (e: unknown) => showError(formError, errorText(e)),
      );
  });
  void load();
  return () => {
    stopped = true;
  };
}

/** aclsPage: the rules and superusers, a form that grants a rule, Revoke. */
export function aclsPage(root: HTMLElement): () => void {
  const principal = h("input", { id: "acl-principal", required: true, placeholder: "billing-service, or *" });
  const kind = h("select", { id: "acl-kind" }, ...["topic", "group", "plugin", "cluster"].map((k) => h("option", { value: k }, k)));
  const pattern = h("input", { id: "acl-pattern", placeholder: "orders, orders.*, or *" });
  const ops = h("input", { id: "acl-operations", required: true, placeholder: "read, write" });
  const deny = h("input", { id: "acl-deny", type: "checkbox" });
  const form = h(
    "form",
    { class: "controls", id: "acl-form" },
    field("Principal", principal),
    field("Kind", kind),
    field("Pattern", pattern),
    field("Operations", ops),
    h("label", { class: "check" }, deny, "deny"),
    h("div", { class: "buttons" }, h("button", { id: "acl-grant", type: "submit" }, "Grant")),
  );
  const result = h("p", { id: "acl-result", class: "status" });
  const { error, formError, list } = frame(root, "ACLs", "Who may do what (docs/security.md lists the operations of each kind). A deny rule wins over every allow rule.", form, result);
  let stopped = false;
  const load = async (): Promise<void> => {
    try {
      const r = await admin().auth.listAcls({});
      if (stopped) return;
      showError(error, undefined);
      list.replaceChildren(
        h("p", { id: "superusers" }, `Superusers: ${r.superusers.length ? r.superusers.join(", ") : "none"}`),
        table(
          "acls",
          ["ID", "Principal", "Kind", "Pattern", "Operations", "Effect", ""],
          r.rules.map((a) => [
            String(a.id),
            a.principal,
            a.kind,
            a.pattern,
            a.operations.join(", "),
            a.deny ? "deny" : "allow",
            confirmButton(
              `revoke-acl-${a.id}`,
              "Revoke",
              `Revoke rule ${a.id}?`,
              async () => {
                await admin().auth.revokeAcl({ id: a.id });
                await load();
              },
              (e) => showError(error, errorText(e)),
            ),
          ]),
        ),
      );
      for (const [i, tr] of [...list.querySelectorAll("table.acls tbody tr")].entries()) (tr as HTMLElement).dataset.id = String(r.rules[i].id);
    } catch (e) {
      if (!stopped) showError(error, errorText(e));
    }
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    showError(formError, undefined);
    const rule = create(AclRuleSchema, {
      principal: principal.value.trim(),
      kind: kind.value,
      pattern: pattern.value.trim(),
      operations: ops.value.split(",").map((o) => o.trim()).filter((o) => o !== ""),
      deny: deny.checked,
    });
    admin()
      .auth.grantAcl({ rule })
      .then(
        (r) => {
          result.textContent = `Granted rule ${r.rule?.id}.`;
          void load();
        },
        (e: unknown) => showError(formError, errorText(e)),
      );
  });
  void load();
  return () => {
    stopped = true;
  };
}

const QUOTA_FIELDS = [
  ["publishBytesPerSec", "Publish bytes/s"],
  ["replayBytesPerSec", "Replay bytes/s"],
  ["streams", "Streams"],
  ["filterFuelPerSec", "Filter fuel/s"],
  ["topics", "Topics"],
  ["partitions", "Partitions"],
] as const;

function quotaCells(q: Quota | undefined): string[] {
  return QUOTA_FIELDS.map(([k]) => {
    const v = q ? q[k] : 0;
    return Number(v) === 0 ? "no limit" : String(v);
  });
}

/** quotasPage: the quotas set, what this node charged, a form that sets one, Remove. */
export function quotasPage(root: HTMLElement): () => void {
  const principal = h("input", { id: "quota-principal", placeholder: "a principal; empty with default" });
  const dflt = h("input", { id: "quota-default", type: "checkbox" });
  const inputs = Object.fromEntries(QUOTA_FIELDS.map(([k]) => [k, h("input", { id: `quota-${k}`, type: "number", min: 0, placeholder: "0: no limit" })])) as {
    [k in (typeof QUOTA_FIELDS)[number][0]]: HTMLInputElement;
  };
  const form = h(
    "form",
    { class: "controls", id: "quota-form" },
    field("Principal", principal),
    h("label", { class: "check" }, dflt, "the default"),
    ...QUOTA_FIELDS.map(([k, label]) => field(label, inputs[k])),
    h("div", { class: "buttons" }, h("button", { id: "quota-set", type: "submit" }, "Set quota")),
  );
  const result = h("p", { id: "quota-result", class: "status" });
  const { error, formError, list } = frame(root, "Quotas", "Limits per principal (all zero removes them), the default for principals without their own, and what this node charged since it started.", form, result);
  let stopped = false;
  const remove = (id: string, who: string, p: string, isDefault: boolean): HTMLElement =>
    confirmButton(
      id,
      "Remove",
      `Remove the quota of ${who}?`,
      async () => {
        await admin().auth.setQuota({ principal: p, defaultQuota: isDefault, quota: create(QuotaSchema, {}) });
        await load();
      },
      (e) => showError(error, errorText(e)),
    );
  const load = async (): Promise<void> => {
    try {
      const r = await admin().auth.listQuotas({});
      if (stopped) return;
      showError(error, undefined);
      const rows: (string | HTMLElement)[][] = Object.entries(r.quotas)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([p, q]) => [p, ...quotaCells(q), remove(`remove-quota-${p}`, p, p, false)]);
      if (r.defaultQuota) rows.push(["(default)", ...quotaCells(r.defaultQuota), remove("remove-quota-default", "the default", "", true)]);
      list.replaceChildren(
        table("quotas", ["Principal", ...QUOTA_FIELDS.map(([, l]) => l), ""], rows),
        h("h2", {}, "Usage on this node"),
        table(
          "quota-usage",
          ["Principal", "Published", "Replayed", "Open streams", "Refused", "Paced", "Topics", "Partitions"],
          r.usage.map((u) => [
            u.principal || "(none)",
            fmtBytes(u.publishedBytes),
            fmtBytes(u.replayedBytes),
            String(u.openStreams),
            String(u.refused),
            u.paced ? fmtMs(Number(u.paced.seconds) * 1000 + u.paced.nanos / 1e6) : "0",
            String(u.topics),
            String(u.partitions),
          ]),
        ),
      );
      for (const tr of list.querySelectorAll<HTMLElement>("table.quotas tbody tr")) tr.dataset.principal = tr.children[0].textContent ?? "";
    } catch (e) {
      if (!stopped) showError(error, errorText(e));
    }
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    showError(formError, undefined);
    let quota: Quota;
    try {
      const n = (k: (typeof QUOTA_FIELDS)[number][0]): bigint => {
        const v = inputs[k].value.trim();
        if (v !== "" && !/^\d+$/.test(v)) throw new Error(`${k}: want a whole number`);
        return BigInt(v || 0);
      };
      quota = create(QuotaSchema, {
        publishBytesPerSec: n("publishBytesPerSec"),
        replayBytesPerSec: n("replayBytesPerSec"),
        streams: Number(n("streams")),
        filterFuelPerSec: n("filterFuelPerSec"),
        topics: Number(n("topics")),
        partitions: Number(n("partitions")),
      });
    } catch (e) {
      showError(formError, e);
      return;
    }
    const p = principal.value.trim();
    admin()
      .auth.setQuota({ principal: dflt.checked ? "" : p, defaultQuota: dflt.checked, quota })
      .then(
        () => {
          result.textContent = `Set the quota of ${dflt.checked ? "the default" : p}.`;
          void load();
        },
        (e: unknown) => showError(formError, errorText(e)),
      );
  });
  void load();
  return () => {
    stopped = true;
  };
}
