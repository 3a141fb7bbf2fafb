package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is the versions of one API the listener serves.
type versionRange struct{ min, max int16 }

// served is every API the listener serves, and its versions. Nothing else
// is advertised: a client asks only for what ApiVersions lists, and an
// API it would need (transactions, groups) is then refused by the client
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
var served = map[int16]versionRange{
	kmsg.Produce.Int16():      {0, 11},
	kmsg.Fetch.Int16():        {4, 12},
	kmsg.ListOffsets.Int16():  {1, 6},
	kmsg.Metadata.Int16():     {0, 12},
	kmsg.ApiVersions.Int16():  {0, 4},
	kmsg.CreateTopics.Int16(): {2, 7},
	kmsg.DeleteTopics.Int16(): {1, 5},
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
