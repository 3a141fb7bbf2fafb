package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is the versions of one API the listener serves.
type versionRange struct{ min, max int16 }

// served is every API the listener serves, and its versions. Nothing else
// is advertised: a client asks only for what ApiVersions lists, and an
// API it would need (transactions, idempotence) is then refused by the client
// itself with a clear message, instead of half working. The reasons
// behind each range:
//
//   - Produce from v0: only v3+ carries the v2 record batches Rewind
//     accepts, but Kafka 4.0 still advertises v0 because older librdkafka
//     stops compressing when it is missing (KAFKA-18659); a v0–v2 request
//     gets UNSUPPORTED_FOR_MESSAGE_FORMAT per partition. Up to 11: v12 is
//     a marker of Kafka 4.0's transaction protocol (KIP-890), v13 names
//     topics by id.
//   - Fetch 4–12: v4 is Kafka 4.0's minimum; v13 names topics by UUID,
//     which Rewind does not assign yet (librdkafka then stays at 12).
//   - Metadata 0–12: v10+ carries topic ids, sent as the null UUID.
//   - ListOffsets 1–6: v1 is the first with timestamps; v7 adds the
//     max-timestamp query (−3), not built.
//   - The group APIs (groups.go): FindCoordinator 0–4 (v5 and v6 are for
//     transactions and share groups); JoinGroup 0–9 (v4+ with KIP-394's
//     MEMBER_ID_REQUIRED round trip; static membership is not served);
//     SyncGroup 0–5; Heartbeat 0–4; LeaveGroup 0–5; OffsetCommit 2–8 and
//     OffsetFetch 1–8 (v2 and v1 are Kafka 4.0's minimums; v9 is KIP-848's
//     member epochs, not served); ListGroups 0–4 (v5 filters by group
//     type, KIP-848); DescribeGroups 0–5; DeleteGroups 0–2.
//   - OffsetForLeaderEpoch 0–4 (epochs.go): every version, all answered
//     from the one epoch, 0, of every partition.
//   - DescribeConfigs 0–4 (configs.go): topics and this broker, every
//     entry read-only (AlterConfigs is not served).
//   - DescribeCluster 0–2 (cluster.go): v1's endpoint types and v2's
//     fenced brokers (there are none) included.
var served = map[int16]versionRange{
	kmsg.FindCoordinator.Int16(): {0, 4},
	kmsg.JoinGroup.Int16():       {0, 9},
	kmsg.SyncGroup.Int16():       {0, 5},
	kmsg.Heartbeat.Int16():       {0, 4},
	kmsg.LeaveGroup.Int16():      {0, 5},
	kmsg.OffsetCommit.Int16():    {2, 8},
	kmsg.OffsetFetch.Int16():     {1, 8},
	kmsg.ListGroups.Int16():      {0, 4},
	kmsg.DescribeGroups.Int16():  {0, 5},
	kmsg.DeleteGroups.Int16():    {0, 2},
	kmsg.Produce.Int16():         {0, 11},
	kmsg.Fetch.Int16():           {4, 12},
	kmsg.ListOffsets.Int16():     {1, 6},
	kmsg.Metadata.Int16():        {0, 12},
	kmsg.ApiVersions.Int16():     {0, 4},
	kmsg.CreateTopics.Int16():    {2, 7},
	kmsg.DeleteTopics.Int16():    {1, 5},

	kmsg.OffsetForLeaderEpoch.Int16(): {0, 4},
	kmsg.DescribeConfigs.Int16():      {0, 4},
	kmsg.DescribeCluster.Int16():      {0, 2},
}

// apiVersions answers ApiVersions: every served API and its range, or
// UNSUPPORTED_VERSION (with the list, at v0) for a version this listener
// does not know.
func apiVersions(req *request) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	if req.msg == nil {
		resp.SetVersion(0)
		resp.ErrorCode = errUnsupportedVersion
	}
	keys := make([]int16, 0, len(served))
	for k := range served {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := served[k]
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, r.min, r.max
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}
