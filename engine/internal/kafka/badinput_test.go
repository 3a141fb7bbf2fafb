package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is a plain TCP connection to the Kafka port, for requests no
// well-behaved client sends.
type rawConn struct {
	t testing.TB
	net.Conn
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A generous bound: a test that hangs fails instead.
	c.SetDeadline(time.Now().Add(60 * time.Second))
	return &rawConn{t, c}
}

// request frames req (header v1, or v2 when flexible) with id 7.
func frameRequest(req kmsg.Request) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// roundTrip sends a frame and reads the response body after the
// correlation id (and the empty tags of a flexible header, when
// flexibleHeader).
func (c *rawConn) roundTrip(frame []byte, flexibleHeader bool) []byte {
	c.t.Helper()
	if _, err := c.Write(frame); err != nil {
		c.t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		c.t.Fatalf("reading the response: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		c.t.Fatal(err)
	}
	if id := binary.BigEndian.Uint32(body); id != 7 {
		c.t.Fatalf("correlation id %d, want 7", id)
	}
	body = body[4:]
	if flexibleHeader {
		body = body[1:]
	}
	return body
}

// closedByServer checks that the server closes the connection without a
// response.
func (c *rawConn) closedByServer() {
	c.t.Helper()
	var b [1]byte
	n, err := c.Read(b[:])
	if n != 0 || !errors.Is(err, io.EOF) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatal("the server kept the connection open")
		}
		if n != 0 {
			c.t.Fatal("the server answered instead of closing the connection")
		}
	}
}

// TestBadFrames sends what breaks the framing: each closes the
// connection before anything is allocated or stored, and the server goes
// on serving others.
func TestBadFrames(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	apiVersions := kmsg.NewPtrApiVersionsRequest()
	apiVersions.Version = 3
	good := frameRequest(apiVersions)
	unknownKey := bytes.Clone(good)
	binary.BigEndian.PutUint16(unknownKey[4:], 999)
	unknownVersion := frameRequest(func() kmsg.Request { r := kmsg.NewPtrMetadataRequest(); r.Version = 12; return r }())
	binary.BigEndian.PutUint16(unknownVersion[6:], 99) // Metadata v99
	noTransactions := frameRequest(kmsg.NewPtrInitProducerIDRequest())
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"2 GiB size", []byte{0x7f, 0xff, 0xff, 0xff, 0, 18, 0, 3}},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xf0}},
		{"size over the limit", binary.BigEndian.AppendUint32(nil, 100<<20+1)},
		{"size below a header", []byte{0, 0, 0, 3, 0, 18, 0}},
		{"unknown api key", unknownKey},
		{"unadvertised api", noTransactions},
		{"unknown version", unknownVersion},
		{"truncated body", append(binary.BigEndian.AppendUint32(nil, uint32(len(good)-4)), good[4:len(good)-3]...)},
		{"garbage body", append(binary.BigEndian.AppendUint32(nil, 20), 0, 3, 0, 12, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, n.Kafka)
			if _, err := c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			if tc.name == "truncated body" {
				// The frame claims more than was sent: the server waits
				// for the rest; the client gives up.
				c.Conn.(*net.TCPConn).CloseWrite()
			}
			c.closedByServer()
		})
	}
	// Still serving.
	c := dialRaw(t, n.Kafka)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(c.roundTrip(good, false)); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions after bad frames: %v, error code %d, %d keys", err, resp.ErrorCode, len(resp.ApiKeys))
	}
}

// TestApiVersions checks the advertised set, and the answer to a version
// the listener does not know: UNSUPPORTED_VERSION with the list, at v0.
func TestApiVersions(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	c := dialRaw(t, n.Kafka)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	frame := frameRequest(req)
	binary.BigEndian.PutUint16(frame[6:], 99)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(c.roundTrip(frame, false)); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ApiVersions v99: error %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
	}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{
		kmsg.Produce.Int16(): {0, 11}, kmsg.Fetch.Int16(): {4, 12}, kmsg.ListOffsets.Int16(): {1, 6},
		kmsg.Metadata.Int16(): {0, 12}, kmsg.ApiVersions.Int16(): {0, 4},
		kmsg.CreateTopics.Int16(): {2, 7}, kmsg.DeleteTopics.Int16(): {1, 5},
		kmsg.FindCoordinator.Int16(): {0, 4}, kmsg.JoinGroup.Int16(): {0, 9}, kmsg.SyncGroup.Int16(): {0, 5},
		kmsg.Heartbeat.Int16(): {0, 4}, kmsg.LeaveGroup.Int16(): {0, 5}, kmsg.OffsetCommit.Int16(): {2, 8},
		kmsg.OffsetFetch.Int16(): {1, 8}, kmsg.ListGroups.Int16(): {0, 4}, kmsg.DescribeGroups.Int16(): {0, 5},
		kmsg.DeleteGroups.Int16(): {0, 2}, kmsg.OffsetForLeaderEpoch.Int16(): {0, 4},
		kmsg.DescribeConfigs.Int16(): {0, 4}, kmsg.DescribeCluster.Int16(): {0, 2},
	}
	if len(got) != len(want) {
		t.Fatalf("advertised %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: advertised %v, want %v", kmsg.NameForKey(k), got[k], v)
		}
	}
}

// TestBadBatches produces batches a broker must refuse, each with its
// Kafka error code, and checks that nothing of them was stored.
func TestBadBatches(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	c := n.client(t)
	createTopic(t, c, "bad", 2)
	good := rawBatch(t, 0, []kmsg.Record{{Key: []byte("k"), Value: []byte("v")}})
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 1
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(make([]byte, 80<<20)) // 80 MiB of zeros: about 80 KiB compressed
	zw.Close()
	idempotent := rawBatch(t, 0, []kmsg.Record{{Value: []byte("v")}})
	binary.BigEndian.PutUint64(idempotent[43:], 5) // producer id 5
	resign(idempotent)
	twoBatches := append(bytes.Clone(good), good...)
	magic1 := bytes.Clone(good)
	magic1[16] = 1
	for _, tc := range []struct {
		name      string
		topic     string
		partition int32
		records   []byte
		want      *kerr.Error
	}{
		{"bad CRC", "bad", 0, badCRC, kerr.CorruptMessage},
		{"zip bomb", "bad", 0, rawBatchWith(1, 1, bomb.Bytes()), kerr.MessageTooLarge},
		{"truncated", "bad", 0, good[:40], kerr.CorruptMessage},
		{"two batches", "bad", 0, twoBatches, kerr.CorruptMessage},
		{"magic 1", "bad", 0, magic1, kerr.UnsupportedForMessageFormat},
		{"idempotent", "bad", 0, idempotent, kerr.InvalidRecord},
		{"record count past the data", "bad", 0, rawBatchWith(0, 1000, []byte{1, 2, 3}), kerr.CorruptMessage},
		{"unknown topic", "nope", 0, good, kerr.UnknownTopicOrPartition},
		{"unknown partition", "bad", 7, good, kerr.UnknownTopicOrPartition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30_000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = tc.topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = tc.partition, tc.records
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Topics[0].Partitions[0]
			if got.ErrorCode != tc.want.Code {
				t.Fatalf("error %v (%v), want %s", kerr.ErrorForCode(got.ErrorCode), deref(got.ErrorMessage), tc.want.Message)
			}
			if got.ErrorMessage == nil || *got.ErrorMessage == "" {
				t.Fatal("no error message")
			}
		})
	}
	for _, p := range []int32{0, 1} {
		if end := listOffsetOf(t, c, "bad", p, -1); end != 0 {
			t.Fatalf("partition %d holds %d records after refused batches", p, end)
		}
	}
	// A good batch still goes in.
	p := n.client(t, kgo.DefaultProduceTopic("bad"))
	produceAll(t, p, testRecords(1, "ok"))
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// resign recomputes a raw batch's CRC32C after an edit.
func resign(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crcOf(b[21:]))
}

// TestBadAdminRequests sends OffsetForLeaderEpoch, DescribeConfigs and
// DescribeCluster frames whose bodies are cut short or garbage (each
// closes the connection) and decodable requests with hostile values
// (each answered with a per-resource error), at every served version;
// the server goes on serving.
func TestBadAdminRequests(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	for _, key := range []kmsg.Key{kmsg.OffsetForLeaderEpoch, kmsg.DescribeConfigs, kmsg.DescribeCluster} {
		for v := int16(0); v <= kmsg.RequestForKey(key.Int16()).MaxVersion(); v++ {
			req := kmsg.RequestForKey(key.Int16())
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.OffsetForLeaderEpochRequest:
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = "t"
				rt.Partitions = append(rt.Partitions, kmsg.NewOffsetForLeaderEpochRequestTopicPartition())
				r.Topics = append(r.Topics, rt)
			case *kmsg.DescribeConfigsRequest:
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "t", []string{"retention.ms"}
				r.Resources = append(r.Resources, rr)
			}
			good := frameRequest(req)
			// A complete frame whose body ends early: the size prefix
			// says what was sent.
			cut := bytes.Clone(good[:len(good)-2])
			binary.BigEndian.PutUint32(cut, uint32(len(cut)-4))
			header := 18 // size, key, version, correlation id, "test"
			if req.IsFlexible() {
				header++ // the header's empty tags
			}
			garbage := bytes.Clone(good[:header])
			garbage = append(garbage, bytes.Repeat([]byte{0x7f}, 24)...) // lengths past the frame
			binary.BigEndian.PutUint32(garbage, uint32(len(garbage)-4))
			for name, frame := range map[string][]byte{"truncated": cut, "garbage": garbage} {
				t.Run(fmt.Sprintf("%s v%d %s", kmsg.NameForKey(key.Int16()), v, name), func(t *testing.T) {
					c := dialRaw(t, n.Kafka)
					if _, err := c.Write(frame); err != nil {
						t.Fatal(err)
					}
					c.closedByServer()
				})
			}
		}
	}

	c := dialRaw(t, n.Kafka)
	// Hostile but decodable: resources and partitions that cannot exist.
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.Version = 4
	for _, topic := range []string{"", strings.Repeat("x", 5000), "../.."} {
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		for _, p := range []int32{-1, 0, 1 << 30} {
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.CurrentLeaderEpoch = p, -7, -9
			rt.Partitions = append(rt.Partitions, rp)
		}
		oe.Topics = append(oe.Topics, rt)
	}
	oeResp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	oeResp.Version = 4
	if err := oeResp.ReadFrom(c.roundTrip(frameRequest(oe), true)); err != nil {
		t.Fatal(err)
	}
	for _, rt := range oeResp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode == 0 {
				t.Errorf("OffsetForLeaderEpoch %.20q/%d: no error", rt.Topic, rp.Partition)
			}
		}
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	for _, typ := range []kmsg.ConfigResourceType{0, kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker, 127} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, strings.Repeat("\x00", 300)
		dc.Resources = append(dc.Resources, rr)
	}
	dcResp := kmsg.NewPtrDescribeConfigsResponse()
	dcResp.Version = 4
	if err := dcResp.ReadFrom(c.roundTrip(frameRequest(dc), true)); err != nil {
		t.Fatal(err)
	}
	if len(dcResp.Resources) != len(dc.Resources) {
		t.Fatalf("DescribeConfigs answered %d of %d resources", len(dcResp.Resources), len(dc.Resources))
	}
	for _, rr := range dcResp.Resources {
		if rr.ErrorCode == 0 || len(rr.Configs) != 0 {
			t.Errorf("DescribeConfigs type %d: error %d, %d configs; want an error and none", rr.ResourceType, rr.ErrorCode, len(rr.Configs))
		}
	}
}
