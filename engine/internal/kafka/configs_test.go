package kafka_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/sdk/client"
)

// configValues is a resource's configs as name → "value SOURCE".
func configValues(rc kadm.ResourceConfig) map[string]string {
	out := map[string]string{}
	for _, c := range rc.Configs {
		out[c.Key] = c.MaybeValue() + " " + c.Source.String()
	}
	return out
}

// TestDescribeTopicConfigs: a topic's Rewind settings under Kafka's
// names, whether set by the topic (made with Rewind's own client) or
// defaults; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION for its
// resource alone; every entry is read-only.
func TestDescribeTopicConfigs(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	c := n.client(t)
	adm := kadm.NewClient(c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createTopic(t, c, "plain", 1)
	if _, err := client.New(n.URL).CreateTopic(ctx, "kept",
		client.WithRetention(36*time.Hour, 5<<20, 0), client.WithCleanup("compact,delete"), client.WithMaxRecordBytes(4096)); err != nil {
		t.Fatal(err)
	}

	rcs, err := adm.DescribeTopicConfigs(ctx, "plain", "kept", "missing")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"plain": {
			"cleanup.policy":         "delete DEFAULT_CONFIG",
			"delete.retention.ms":    "86400000 DEFAULT_CONFIG",
			"max.message.bytes":      "1048576 DEFAULT_CONFIG",
			"message.timestamp.type": "LogAppendTime DEFAULT_CONFIG",
			"min.insync.replicas":    "1 DEFAULT_CONFIG",
			"retention.bytes":        "-1 DEFAULT_CONFIG",
			"retention.ms":           "-1 DEFAULT_CONFIG",
		},
		"kept": {
			"cleanup.policy":         "compact,delete DYNAMIC_TOPIC_CONFIG",
			"delete.retention.ms":    "86400000 DEFAULT_CONFIG",
			"max.message.bytes":      "4096 DYNAMIC_TOPIC_CONFIG",
			"message.timestamp.type": "LogAppendTime DEFAULT_CONFIG",
			"min.insync.replicas":    "1 DEFAULT_CONFIG",
			"retention.bytes":        strconv.Itoa(5<<20) + " DYNAMIC_TOPIC_CONFIG",
			"retention.ms":           strconv.Itoa(36*3600*1000) + " DYNAMIC_TOPIC_CONFIG",
		},
	}
	for name, w := range want {
		rc, err := rcs.On(name, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("%s: %v %v", name, err, rc.Err)
		}
		if d := cmp.Diff(w, configValues(rc)); d != "" {
			t.Errorf("%s configs (-want +got):\n%s", name, d)
		}
	}
	missing, err := rcs.On("missing", nil)
	if err != nil || !errors.Is(missing.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v, resource error %v, want UNKNOWN_TOPIC_OR_PARTITION", err, missing.Err)
	}

	// Raw: read-only flags, a names filter, and documentation on request.
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, "kept", []string{"retention.ms", "no.such.config"}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("filtered DescribeConfigs: %+v", resp.Resources)
	}
	e := resp.Resources[0].Configs[0]
	if e.Name != "retention.ms" || !e.ReadOnly || e.IsDefault || e.ConfigType != kmsg.ConfigTypeLong || e.Documentation == nil || *e.Documentation == "" {
		t.Fatalf("retention.ms entry: %+v", e)
	}
}

// TestDescribeBrokerConfigs: this node's fixed settings, asked for by
// its id or with no name; another broker id and an unserved resource
// type are INVALID_REQUEST for that resource.
func TestDescribeBrokerConfigs(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	c := n.client(t)
	adm := kadm.NewClient(c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) != 1 {
		t.Fatalf("ListBrokers: %v %v", brokers, err)
	}
	id := brokers[0].NodeID
	for _, ids := range [][]int32{nil, {id}} {
		rcs, err := adm.DescribeBrokerConfigs(ctx, ids...)
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("DescribeBrokerConfigs(%v): %v %+v", ids, err, rcs)
		}
		got := configValues(rcs[0])
		for k, v := range map[string]string{
			"node.id":                    strconv.Itoa(int(id)) + " STATIC_BROKER_CONFIG",
			"auto.create.topics.enable":  "false DEFAULT_CONFIG",
			"log.message.timestamp.type": "LogAppendTime DEFAULT_CONFIG",
			"message.max.bytes":          "1048576 DEFAULT_CONFIG",
		} {
			if got[k] != v {
				t.Errorf("DescribeBrokerConfigs(%v) %s = %q, want %q", ids, k, got[k], v)
			}
		}
	}

	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(id) + 1)}, {kmsg.ConfigResourceTypeBrokerLogger, strconv.Itoa(int(id))}, {kmsg.ConfigResourceTypeGroupConfig, "g"}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		req.Resources = append(req.Resources, rr)
	}
	resp, err := req.RequestWith(ctx, c.Broker(int(id)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 3 {
		t.Fatalf("answered %d resources, want 3", len(resp.Resources))
	}
	for _, rr := range resp.Resources {
		if rr.ErrorCode != kerr.InvalidRequest.Code || len(rr.Configs) != 0 {
			t.Errorf("%v %q: error %d, %d configs; want INVALID_REQUEST and none", rr.ResourceType, rr.ResourceName, rr.ErrorCode, len(rr.Configs))
		}
	}
}
