package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine/internal/broker"
)

// produce answers Produce. Each partition's batch is decoded and checked
// first (decodeBatch); the accepted batches of a topic are then published
// in one call (broker.PublishPartial: the partitions append in parallel
// and each succeeds or fails on its own). The broker acknowledges only
// records committed on a raft majority, whatever acks asks: acks=1 gets
// the same guarantee as acks=all, and acks=0 is served the same way
// without a response. A batch's records are stored together, so their
// offsets are consecutive and the first is the Kafka base offset;
// LogAppendTime is the leader's append time. What a request's batches
// decompress to is bounded per batch (Config.MaxBatchBytes) and for the
// whole request (Config.MaxRequestBytes); past either, the batch gets
// MESSAGE_TOO_LARGE.
func (s *Server) produce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	ctx, cancel := s.requestContext(req.TimeoutMillis)
	defer cancel()
	resp := kmsg.NewPtrProduceResponse()
	if req.TransactionID != nil {
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, produceFailed(t, &batchError{kerr.TransactionalIDAuthorizationFailed, "this broker does not serve transactions"}))
		}
		return resp
	}
	budget := int(s.cfg.MaxRequestBytes) // decompressed bytes left for this request
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		var recs []broker.PublishRecord
		type span struct{ index, from, to int }
		var spans []span
		for i, p := range t.Partitions {
			rp := &rt.Partitions[i]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			var err error
			var batch []broker.PublishRecord
			switch {
			case req.Version < 3:
				err = &batchError{kerr.UnsupportedForMessageFormat, "Produce v0–v2 (message sets v0/v1): this broker takes v2 record batches, Produce v3+"}
			case p.Partition < 0:
				err = &batchError{kerr.UnknownTopicOrPartition, "negative partition"}
			default:
				// The request's batches share one budget as well, so that
				// many small batches cannot each expand to the limit.
				batch, err = decodeBatch(p.Records, min(s.cfg.MaxBatchBytes, budget))
				for _, r := range batch {
					budget -= len(r.Key) + len(r.Value)
					for _, h := range r.Headers {
						budget -= len(h.Key) + len(h.Value)
					}
				}
			}
			if err != nil {
				setProduceError(rp, err)
				continue
			}
			for j := range batch {
				batch[j].Partition, batch[j].HasPartition = uint32(p.Partition), true
			}
			spans = append(spans, span{i, len(recs), len(recs) + len(batch)})
			recs = append(recs, batch...)
		}
		if len(recs) > 0 {
			_, res, err := s.b.PublishPartial(ctx, t.Topic, recs)
			for _, sp := range spans {
				rp := &rt.Partitions[sp.index]
				perr := err
				if perr == nil {
					perr = res[sp.from].Err
				}
				if perr != nil {
					setProduceError(rp, s.readError(t.Topic, rp.Partition, perr))
					continue
				}
				rp.BaseOffset = int64(res[sp.from].Offset)
				rp.LogAppendTime = res[sp.from].AppendTime / 1e6
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// partitionError is err, or UNKNOWN_TOPIC_OR_PARTITION when partition p
// is past the topic's partitions.
func partitionError(b *broker.Broker, topic string, p int32, err error) error {
	if t, _, derr := b.DescribeTopic(topic); derr == nil && uint32(p) >= t.Partitions {
		return &batchError{kerr.UnknownTopicOrPartition, err.Error()}
	}
	return err
}

func setProduceError(rp *kmsg.ProduceResponseTopicPartition, err error) {
	rp.ErrorCode = codeOf(err)
	rp.BaseOffset, rp.LogAppendTime = -1, -1
	if msg := messageOf(err); msg != "" {
		rp.ErrorMessage = kmsg.StringPtr(msg)
	}
}

// produceFailed answers every partition of t with err.
func produceFailed(t kmsg.ProduceRequestTopic, err error) kmsg.ProduceResponseTopic {
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition = p.Partition
		setProduceError(&rp, err)
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// messageOf is the text a response may carry for err: empty for an
// error of no known class, whose text stays in the server.
func messageOf(err error) string {
	if codeOf(err) == kerr.UnknownServerError.Code {
		return ""
	}
	return err.Error()
}

// optString is s, or nil when empty.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
