package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaderEpoch is the Kafka leader epoch of every partition. Rewind has no
// Kafka epochs: every node names itself the leader of every partition
// (metadata.go), so the leader a client sees never changes and the log
// it reads is never truncated (a raft commit is final). One epoch per
// partition, 0 from its first offset to its end, says exactly that, the
// same from every node. Metadata, ListOffsets and the batches Fetch
// returns carry it, and OffsetForLeaderEpoch answers from it, so a client
// validating its position (KIP-320) always finds it intact. We rejected
// the partition's raft term: it differs between nodes, changes on a raft
// election the Kafka client never sees, and answering for an old term
// would need a record of where each term began.
const leaderEpoch int32 = 0

// lookupsInFlight bounds the partitions of one OffsetForLeaderEpoch
// request looked up at once: a request may name thousands.
const lookupsInFlight = 64

// offsetForLeaderEpoch answers OffsetForLeaderEpoch as Kafka's epoch
// cache does with one entry, epoch 0 from offset 0:
//
//   - a CurrentLeaderEpoch (v2+) above 0 is UNKNOWN_LEADER_EPOCH (the
//     client knows of an epoch this node does not); −1 skips the check;
//   - epoch 0 ends at the log end offset (the high watermark, as
//     ListOffsets −1 answers);
//   - any other epoch (−1, or one after 0) is unknown: epoch −1, end
//     offset −1, no error.
//
// The partitions of a request are looked up in parallel, at most
// lookupsInFlight at a time.
func (s *Server) offsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	ctx, cancel := s.requestContext(0)
	defer cancel()
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	var wg sync.WaitGroup
	sem := make(chan struct{}, lookupsInFlight)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(t.Partitions))
		for i, p := range t.Partitions {
			rp := &rt.Partitions[i]
			*rp = kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = p.Partition, -1, -1
			switch {
			case p.Partition < 0:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case req.Version >= 2 && p.CurrentLeaderEpoch > leaderEpoch:
				rp.ErrorCode = kerr.UnknownLeaderEpoch.Code
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				// The lookup also proves the partition exists, whatever
				// epoch was asked for.
				end, _, err := s.locate(ctx, t.Topic, p.Partition, listLatest)
				if err != nil {
					rp.ErrorCode = codeOf(err)
					return
				}
				if p.LeaderEpoch == leaderEpoch {
					rp.LeaderEpoch, rp.EndOffset = leaderEpoch, end
				}
			}()
		}
		resp.Topics = append(resp.Topics, rt)
	}
	wg.Wait()
	return resp
}
