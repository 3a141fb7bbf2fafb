package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine/internal/broker"
)

// metadata answers Metadata. The node lists itself as the only broker and
// the leader of every partition: whatever node it reaches, a Kafka
// request is served through the broker, which routes writes to each
// partition's raft leader and reads from it (docs/kafka.md, "Clusters").
// Topics are never created by a Metadata request (auto-creation is off);
// an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
func (s *Server) metadata(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	br := kmsg.NewMetadataResponseBroker()
	br.NodeID, br.Host, br.Port = s.node, s.host, s.port
	resp.Brokers = []kmsg.MetadataResponseBroker{br}
	resp.ClusterID = kmsg.StringPtr(clusterID(s.b))
	resp.ControllerID = s.node
	var names []string
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, t := range s.b.ListTopics() {
			names = append(names, t.Name)
		}
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	for _, name := range names {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(name)
		t, _, err := s.b.DescribeTopic(name)
		if err != nil {
			mt.ErrorCode = codeOf(err)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		for p := range t.Partitions {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = int32(p)
			mp.Leader, mp.LeaderEpoch = s.node, leaderEpoch
			mp.Replicas, mp.ISR = []int32{s.node}, []int32{s.node}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// clusterID names the cluster for Metadata: the Rewind cluster's id, or
// the node's for a node alone.
func clusterID(b *broker.Broker) string {
	if id := b.ClusterID(); id != 0 {
		return fmt.Sprintf("rewind-%016x", id)
	}
	return fmt.Sprintf("rewind-node-%d", b.NodeID())
}

// requestContext bounds one admin or produce request by its timeout
// (default 30 s, at most 5 minutes) and the server's life.
func (s *Server) requestContext(ms int32) (context.Context, context.CancelFunc) {
	d := time.Duration(ms) * time.Millisecond
	if d <= 0 {
		d = 30 * time.Second
	}
	return context.WithTimeout(s.ctx, min(d, 5*time.Minute))
}

// createTopics answers CreateTopics through the broker. Rewind places
// replicas itself: an explicit replica assignment is refused, and so is
// any topic config (none is mapped onto Rewind's settings yet), so that a
// setting a client relies on is never silently dropped.
func (s *Server) createTopics(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	ctx, cancel := s.requestContext(req.TimeoutMillis)
	defer cancel()
	resp := kmsg.NewPtrCreateTopicsResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		fail := func(code *kerr.Error, msg string) {
			rt.ErrorCode, rt.ErrorMessage = code.Code, kmsg.StringPtr(msg)
		}
		parts := t.NumPartitions
		if parts == -1 {
			parts = 1 // Kafka's num.partitions default
		}
		switch {
		case len(t.ReplicaAssignment) > 0:
			fail(kerr.InvalidReplicaAssignment, "Rewind places replicas itself: send a partition count and a replication factor")
		case len(t.Configs) > 0:
			fail(kerr.InvalidConfig, fmt.Sprintf("topic config %q: this broker maps no Kafka topic configs yet (set retention with rewind topic alter)", t.Configs[0].Name))
		case parts <= 0 || parts > broker.MaxPartitions:
			fail(kerr.InvalidPartitions, fmt.Sprintf("%d partitions: use 1 to %d", parts, broker.MaxPartitions))
		case t.ReplicationFactor < -1 || t.ReplicationFactor == 0:
			fail(kerr.InvalidReplicationFactor, fmt.Sprintf("replication factor %d", t.ReplicationFactor))
		case broker.ValidateTopicName(t.Topic) != nil:
			fail(kerr.InvalidTopicException, broker.ValidateTopicName(t.Topic).Error())
		case req.ValidateOnly:
		default:
			rf := uint32(0)
			if t.ReplicationFactor > 0 {
				rf = uint32(t.ReplicationFactor)
			}
			info, err := s.b.CreateTopic(ctx, broker.TopicSpec{Name: t.Topic, Partitions: uint32(parts), ReplicationFactor: rf, DedupeWindow: -1})
			if err != nil {
				rt.ErrorCode, rt.ErrorMessage = codeOf(err), optString(messageOf(err))
			} else {
				parts, rf = int32(info.Partitions), info.ReplicationFactor
			}
			rt.ReplicationFactor = int16(rf)
		}
		rt.NumPartitions = parts
		if rt.ErrorCode != 0 {
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// deleteTopics answers DeleteTopics through the broker.
func (s *Server) deleteTopics(req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	ctx, cancel := s.requestContext(req.TimeoutMillis)
	defer cancel()
	resp := kmsg.NewPtrDeleteTopicsResponse()
	for _, name := range req.TopicNames {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		if err := s.b.DeleteTopic(ctx, name); err != nil {
			rt.ErrorCode, rt.ErrorMessage = codeOf(err), optString(messageOf(err))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
