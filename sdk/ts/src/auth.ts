// The admin of principals, their tokens, ACL rules and quotas (the
// AuthService, docs/security.md): client.auth. It answers only on a server
// started with --auth (FailedPrecondition otherwise), and every call needs
// the cluster `admin` right. It wraps the service as the Go client does
// (sdk/client/auth.go) and as `rewind user|acl|quota` use it.
//
// Calls that change nothing (the lists, checkAcl) and setQuota (setting
// the same quota twice is setting it once) are retried like reads; the
// others are sent again only when the first attempt certainly did nothing
// (a grant sent twice would add two rules).

import { create } from "@bufbuild/protobuf";
import {
  AclRuleSchema,
  QuotaSchema,
  type AclRule,
  type CheckAclResponse,
  type ListQuotasResponse,
  type Quota,
  type UserToken,
} from "./gen/rewind/v1/auth_pb.js";
import { durationProto, type DurationLike } from "./duration.js";
import { Code, ConnectError, RewindError } from "./errors.js";
import { type CallOptions, type Unary } from "./wire.js";

const REPEATABLE = { again: true, hedge: true };
const ONCE = { again: false };

/** What an ACL rule names: the fields of an AclRule a caller gives (the server assigns id). */
export interface AclRuleSpec {
  /** The principal, or "*" for every authenticated principal. */
  principal: string;
  /** What the rule is about. */
  kind: "topic" | "group" | "plugin" | "cluster";
  /** A literal name, a prefix ending in "*" ("orders.*"), or "*"; empty (or left out) for the cluster. */
  pattern?: string;
  /** The operations ("read", "replay", "describe", "all", ...: docs/security.md lists them per kind). */
  operations: string[];
  /** A deny rule wins over every allow rule. */
  deny?: boolean;
}

/** A principal's limits; a field left out or 0 is no limit. */
export interface QuotaLimits {
  /** Bytes of records published per second (over it, publishes fail with ResourceExhausted). */
  publishBytesPerSec?: number | bigint;
  /** Bytes of history replayed per second (over it, replays are paced). */
  replayBytesPerSec?: number | bigint;
  /** Streams open at once. */
  streams?: number;
  /** WebAssembly fuel the principal's filtered replays burn per second (paced). */
  filterFuelPerSec?: number | bigint;
  /** Topics the principal created that still exist. */
  topics?: number;
  /** Partitions of those topics, all together. */
  partitions?: number;
}

/**
 * Auth is client.auth: users (principals and their bearer tokens), ACL
 * rules and quotas. It is safe to share, as the client is.
 */
export class Auth {
  readonly #unary: Unary;

  /** @internal made by the Client. */
  constructor(unary: Unary) {
    this.#unary = unary;
  }

  /**
   * createUser issues a new bearer token for the principal name (a
   * principal may hold several), valid for expiresIn (default: until
   * revoked). The token is in this answer only: the server keeps its hash.
   */
  async createUser(name: string, opts: CallOptions & { expiresIn?: DurationLike } = {}): Promise<{ token: string; user: UserToken }> {
    const expiresIn = opts.expiresIn !== undefined ? durationProto(opts.expiresIn) : undefined;
    const r = await this.#unary(ONCE, opts, (c, signal) => c.auth.createUser({ name, expiresIn }, { signal }));
    return { token: r.token, user: r.user! };
  }

  /** listUsers lists the tokens (never their secrets). */
  async listUsers(opts?: CallOptions): Promise<UserToken[]> {
    return (await this.#unary(REPEATABLE, opts, (c, signal) => c.auth.listUsers({}, { signal }))).users;
  }

  /**
   * revokeUser deletes one token (a token id, 12 hex digits) or every
   * token of a principal, and returns what it deleted (NotFound: nothing
   * matched). Streams opened with them end within a few seconds.
   */
  async revokeUser(nameOrTokenId: string, opts?: CallOptions): Promise<UserToken[]> {
    return (await this.#unary(ONCE, opts, (c, signal) => c.auth.revokeUser({ nameOrTokenId }, { signal }))).revoked;
  }

  /** grantAcl adds a rule and returns it with its id. */
  async grantAcl(rule: AclRuleSpec, opts?: CallOptions): Promise<AclRule> {
    const r = await this.#unary(ONCE, opts, (c, signal) => c.auth.grantAcl({ rule: aclRule(rule) }, { signal }));
    return r.rule!;
  }

  /** listAcls lists the rules (only principal's and those for "*", when principal is given) and the superusers. */
  async listAcls(principal = "", opts?: CallOptions): Promise<{ rules: AclRule[]; superusers: string[] }> {
    const r = await this.#unary(REPEATABLE, opts, (c, signal) => c.auth.listAcls({ principal }, { signal }));
    return { rules: r.rules, superusers: r.superusers };
  }

  /**
   * revokeAcl deletes the rule with an id, or takes a spec's operations
   * off the rules with its principal, kind, pattern and verb (allow or
   * deny). It returns the rules as they were (NotFound: nothing matched).
   */
  async revokeAcl(rule: number | bigint | AclRuleSpec, opts?: CallOptions): Promise<AclRule[]> {
    const req = typeof rule === "object" ? { id: 0n, match: aclRule(rule) } : { id: BigInt(rule) };
    return (await this.#unary(ONCE, opts, (c, signal) => c.auth.revokeAcl(req, { signal }))).revoked;
  }

  /**
   * checkAcl explains whether principal may do operation on resource
   * ("topic:NAME", "group:NAME", "plugin:NAME" or "cluster"): allowed, the
   * rule that decided, and why in words.
   */
  async checkAcl(principal: string, operation: string, resource: string, opts?: CallOptions): Promise<CheckAclResponse> {
    return this.#unary(REPEATABLE, opts, (c, signal) => c.auth.checkAcl({ principal, operation, resource }, { signal }));
  }

  /**
   * setQuota sets principal's quota, or with principal null the default
   * quota of every principal without its own (superusers are never given
   * the default). A quota without limits (all left out or 0) removes it.
   */
  async setQuota(principal: string | null, limits: QuotaLimits, opts?: CallOptions): Promise<void> {
    if (principal === "") {
      throw new RewindError(new ConnectError("setQuota: give a principal, or null for the default quota", Code.InvalidArgument));
    }
    const req = { principal: principal ?? "", defaultQuota: principal === null, quota: quotaProto(limits) };
    await this.#unary(REPEATABLE, opts, (c, signal) => c.auth.setQuota(req, { signal }));
  }

  /**
   * listQuotas returns the quotas set (per principal, and the default),
   * and what the node that answered charged and held back per principal
   * since it started.
   */
  async listQuotas(opts?: CallOptions): Promise<ListQuotasResponse> {
    return this.#unary(REPEATABLE, opts, (c, signal) => c.auth.listQuotas({}, { signal }));
  }
}

function aclRule(r: AclRuleSpec): AclRule {
  return create(AclRuleSchema, {
    principal: r.principal,
    kind: r.kind,
    pattern: r.pattern ?? "",
    operations: r.operations,
    deny: r.deny ?? false,
  });
}

function quotaProto(q: QuotaLimits): Quota {
  const u64 = (name: string, v: number | bigint | undefined): bigint => {
    if (v === undefined) return 0n;
    if (typeof v === "number" && !Number.isSafeInteger(v)) throw badLimit(name, v);
    const b = BigInt(v);
    if (b < 0n || b >= 1n << 64n) throw badLimit(name, v);
    return b;
  };
  const u32 = (name: string, v: number | undefined): number => {
    if (v === undefined) return 0;
    if (!Number.isInteger(v) || v < 0 || v > 0xffff_ffff) throw badLimit(name, v);
    return v;
  };
  return create(QuotaSchema, {
    publishBytesPerSec: u64("publishBytesPerSec", q.publishBytesPerSec),
    replayBytesPerSec: u64("replayBytesPerSec", q.replayBytesPerSec),
    streams: u32("streams", q.streams),
    filterFuelPerSec: u64("filterFuelPerSec", q.filterFuelPerSec),
    topics: u32("topics", q.topics),
    partitions: u32("partitions", q.partitions),
  });
}

function badLimit(name: string, v: number | bigint): RewindError {
  return new RewindError(new ConnectError(`quota ${name} ${v}: want a whole number, 0 (no limit) or more`, Code.InvalidArgument));
}
