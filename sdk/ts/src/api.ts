// Everything both entry points (index.ts, node.ts) export besides
// createClient.

export { Client } from "./client.js";
export { bytes, text, headerText, headerTexts, normalize } from "./wire.js";
export type {
  AppendOptions,
  ClientOptions,
  DurationLike,
  Message,
  Protocol,
  PublishOptions,
  PublishResult,
  ResetOptions,
  RetentionOptions,
  TestRecord,
  TestSource,
  TopicOptions,
  TransportFactory,
} from "./client.js";
export type { Bytes, CallOptions, FilterSpec, Header, RewindRecord, Record } from "./wire.js";
export { Auth } from "./auth.js";
export type { AclRuleSpec, QuotaLimits } from "./auth.js";
export { Subscription } from "./subscription.js";
export type { PartitionPosition, ReplayEvent, SubscribeOptions } from "./subscription.js";
export { Code, ConditionError, ConnectError, PartialError, ReconnectError, RewindError } from "./errors.js";
export {
  TAG_HEADER,
  TYPE_HEADER,
  expectAny,
  expectExists,
  expectNone,
  expectVersion,
  failIfMatched,
  forKey,
  recordTags,
  recordType,
} from "./eventstore.js";
export type { Condition, Query, QueryItem, ReadOptions, ReadResult } from "./eventstore.js";
export {
  Position,
  formatPosition,
  parsePosition,
  parseRFC3339,
  formatRFC3339,
  toPosition,
  startProto,
  stopProto,
  resetTargetProto,
} from "./position.js";
export type { Instant, PositionLike } from "./position.js";
export { parseDuration, parseGoDuration, formatGoDuration } from "./duration.js";
export { MAX_MESSAGE_BYTES } from "./limits.js";
export { FilterFailure } from "./gen/rewind/v1/errors_pb.js";
export type { ConditionFailed, FilterError, IdempotencyConflict, OffsetRange, RecordTooLarge } from "./gen/rewind/v1/errors_pb.js";
export { CleanupPolicy } from "./gen/rewind/v1/topic_pb.js";
export type { PartitionInfo, Retention, Topic, TopicConfig } from "./gen/rewind/v1/topic_pb.js";
export type { GroupMember, GroupPartition, GroupSummary, GroupTopic, ResetGroupResponse, ResetPlanRow } from "./gen/rewind/v1/group_pb.js";
export { CompileState } from "./gen/rewind/v1/plugin_pb.js";
export type { Plugin, TestPluginResponse, TestResult } from "./gen/rewind/v1/plugin_pb.js";
export type { AclRule, CheckAclResponse, ListQuotasResponse, Quota, QuotaUsage, UserToken } from "./gen/rewind/v1/auth_pb.js";
export type { GetClusterStatusResponse, NodeStatus, PartitionStatus, ReplicaMove } from "./gen/rewind/v1/cluster_pb.js";
