package kafka

import (
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine/internal/broker"
)

// config is one Kafka config entry as DescribeConfigs answers it.
type config struct {
	name, value string
	typ         kmsg.ConfigType
	// set: it differs from Rewind's default, set for the topic
	// (DYNAMIC_TOPIC_CONFIG) or the node (STATIC_BROKER_CONFIG);
	// otherwise DEFAULT_CONFIG. The catalog stores some defaults
	// explicitly, so "set" is decided by value.
	set bool
	doc string
}

// describeConfigs answers DescribeConfigs for topics and this broker
// with the settings Rewind has, under Kafka's names. Every entry is
// read-only: AlterConfigs is not served, and Rewind changes a topic's
// retention through its own API (`rewind topic alter`). A topic that does
// not exist is UNKNOWN_TOPIC_OR_PARTITION for its resource; a broker
// other than this node, or another resource type, INVALID_REQUEST.
func (s *Server) describeConfigs(req *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := kmsg.NewPtrDescribeConfigsResponse()
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var cfgs []config
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t, _, err := s.b.DescribeTopic(r.ResourceName)
			if err != nil {
				rr.ErrorCode = codeOf(err)
				rr.ErrorMessage = kmsg.StringPtr("topic " + strconv.Quote(r.ResourceName) + ": " + kerr.ErrorForCode(rr.ErrorCode).Error())
				break
			}
			cfgs = topicConfigs(t)
		case kmsg.ConfigResourceTypeBroker:
			if r.ResourceName != "" && r.ResourceName != strconv.Itoa(int(s.node)) {
				rr.ErrorCode = kerr.InvalidRequest.Code
				rr.ErrorMessage = kmsg.StringPtr("this node is broker " + strconv.Itoa(int(s.node)) + ": ask each broker for its own configs")
				break
			}
			cfgs = s.brokerConfigs()
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = kmsg.StringPtr("only topic and broker configs are served")
		}
		rr.Configs = configEntries(cfgs, r.ConfigNames, r.ResourceType, req.IncludeDocumentation)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// configEntries encodes cfgs, only those named when names is not nil
// (a name Rewind has no value for is left out, as Kafka does).
func configEntries(cfgs []config, names []string, rt kmsg.ConfigResourceType, withDoc bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, c := range cfgs {
		if names != nil && !slices.Contains(names, c.name) {
			continue
		}
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name, e.Value, e.ReadOnly, e.ConfigType = c.name, kmsg.StringPtr(c.value), true, c.typ
		e.IsDefault, e.Source = !c.set, kmsg.ConfigSourceDefaultConfig
		if c.set {
			e.Source = kmsg.ConfigSourceDynamicTopicConfig
			if rt == kmsg.ConfigResourceTypeBroker {
				e.Source = kmsg.ConfigSourceStaticBrokerConfig
			}
		}
		if withDoc {
			e.Documentation = kmsg.StringPtr(c.doc)
		}
		out = append(out, e)
	}
	return out
}

// topicConfigs maps a topic's Rewind settings onto Kafka's names.
// Retention limits of 0 (none) are Kafka's −1; min.insync.replicas is a
// raft majority of the replication factor, which is what a write waits
// for whatever acks the producer asks.
func topicConfigs(t *broker.TopicInfo) []config {
	r := t.Retention
	age, bytes := int64(-1), int64(-1)
	if r.MaxAgeNanos > 0 {
		age = time.Duration(r.MaxAgeNanos).Milliseconds()
	}
	if r.MaxBytes > 0 {
		bytes = int64(min(r.MaxBytes, 1<<63-1))
	}
	cleanup := r.Cleanup
	if cleanup == "" {
		cleanup = "delete"
	}
	delRet := time.Duration(r.DeleteRetentionNanos)
	if delRet == 0 {
		delRet = broker.DefaultDeleteRetention
	}
	maxRec := t.MaxRecordBytes
	if maxRec == 0 {
		maxRec = broker.DefaultMaxRecordBytes
	}
	rf := max(t.ReplicationFactor, 1)
	return []config{
		{"cleanup.policy", cleanup, kmsg.ConfigTypeList, cleanup != "delete", "delete, compact or compact,delete (Rewind's retention cleanup)"},
		{"delete.retention.ms", strconv.FormatInt(delRet.Milliseconds(), 10), kmsg.ConfigTypeLong, delRet != broker.DefaultDeleteRetention, "how long compaction keeps tombstones"},
		{"max.message.bytes", strconv.FormatUint(uint64(maxRec), 10), kmsg.ConfigTypeInt, maxRec != broker.DefaultMaxRecordBytes, "the largest record (key, value and headers) Rewind accepts; a batch may hold many"},
		{"message.timestamp.type", "LogAppendTime", kmsg.ConfigTypeString, false, "records carry the partition leader's append time"},
		{"min.insync.replicas", strconv.FormatUint(uint64(rf/2+1), 10), kmsg.ConfigTypeInt, false, "a raft majority of the replicas: every write waits for it, whatever acks asks"},
		{"retention.bytes", strconv.FormatInt(bytes, 10), kmsg.ConfigTypeLong, bytes != -1, "bytes kept per partition; -1: no limit"},
		{"retention.ms", strconv.FormatInt(age, 10), kmsg.ConfigTypeLong, age != -1, "how long records are kept; -1: no limit"},
	}
}

// brokerConfigs is what this node, as a Kafka broker, is fixed at.
func (s *Server) brokerConfigs() []config {
	return []config{
		{"auto.create.topics.enable", "false", kmsg.ConfigTypeBoolean, false, "Metadata never creates a topic"},
		{"broker.id", strconv.Itoa(int(s.node)), kmsg.ConfigTypeInt, true, "this node's id as a Kafka broker"},
		{"log.message.timestamp.type", "LogAppendTime", kmsg.ConfigTypeString, false, "records carry the partition leader's append time"},
		{"message.max.bytes", strconv.Itoa(broker.DefaultMaxRecordBytes), kmsg.ConfigTypeInt, false, "the default largest record of a topic"},
		{"node.id", strconv.Itoa(int(s.node)), kmsg.ConfigTypeInt, true, "this node's id as a Kafka broker"},
		{"num.partitions", "1", kmsg.ConfigTypeInt, false, "partitions of a topic created with -1 partitions"},
		{"socket.request.max.bytes", strconv.Itoa(int(s.cfg.MaxRequestBytes)), kmsg.ConfigTypeInt, true, "the largest request frame (KafkaConfig.MaxRequestBytes)"},
	}
}
