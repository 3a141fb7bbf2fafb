package runner

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// gauntletRPCs are every RPC of the public API (Subscribe is the one
// server stream).
var gauntletRPCs = []string{
	"rewind.v1.PublishService/Publish",
	"rewind.v1.SubscribeService/Subscribe",
	"rewind.v1.TopicService/CreateTopic",
	"rewind.v1.TopicService/ListTopics",
	"rewind.v1.TopicService/DescribeTopic",
	"rewind.v1.TopicService/AlterTopic",
	"rewind.v1.TopicService/DeleteTopic",
	"rewind.v1.GroupService/Commit",
	"rewind.v1.GroupService/ListGroups",
	"rewind.v1.GroupService/DescribeGroup",
	"rewind.v1.GroupService/DeleteGroup",
	"rewind.v1.GroupService/ResetGroup",
	"rewind.v1.PluginService/UploadPlugin",
	"rewind.v1.PluginService/ListPlugins",
	"rewind.v1.PluginService/GetPlugin",
	"rewind.v1.PluginService/DeletePlugin",
	"rewind.v1.PluginService/TestPlugin",
	"rewind.v1.ClusterService/GetClusterStatus",
	"rewind.v1.ClusterService/TransferLeader",
	"rewind.v1.ClusterService/AddNode",
	"rewind.v1.ClusterService/RemoveNode",
	"rewind.v1.ClusterService/Rebalance",
}

// gauntletJSON are requests that are well formed but wrong, as JSON
// (Connect's JSON codec), for the RPCs they name; the topic "chaos" is the
// workload's.
var gauntletJSON = []struct{ rpc, body, what string }{
	{"rewind.v1.PublishService/Publish", `{"topic":"no-such-topic","records":[{"value":"eA=="}]}`, "publish to a missing topic"},
	{"rewind.v1.PublishService/Publish", `{"topic":"chaos","records":[{"value":"eA==","partition":4000000000}]}`, "publish to a partition out of range"},
	{"rewind.v1.PublishService/Publish", `{"topic":"chaos","records":[]}`, "publish no record"},
	{"rewind.v1.PublishService/Publish", `{"topic":"","records":[{"value":"eA=="}]}`, "publish with no topic"},
	{"rewind.v1.PublishService/Publish", `{"topic":"chaos","records":[{"value":"eA==","idempotencyKey":"` + strings.Repeat("k", 5000) + `"}]}`, "an idempotency key of 5,000 bytes"},
	{"rewind.v1.TopicService/CreateTopic", `{"name":"gauntlet","config":{"partitions":0}}`, "create a topic of 0 partitions"},
	{"rewind.v1.TopicService/CreateTopic", `{"name":"` + strings.Repeat("n", 100000) + `","config":{"partitions":1}}`, "a 100,000-character topic name"},
	{"rewind.v1.TopicService/CreateTopic", `{"name":"chaos","config":{"partitions":1,"replicationFactor":99}}`, "replication above the node count"},
	{"rewind.v1.TopicService/AlterTopic", `{"name":"no-such-topic"}`, "alter a missing topic"},
	{"rewind.v1.TopicService/DeleteTopic", `{"name":"no-such-topic"}`, "delete a missing topic"},
	{"rewind.v1.GroupService/Commit", `{"group":"g","topic":"chaos","generation":"18446744073709551615","offsets":[{"partition":0,"offset":"1"}]}`, "a commit from a generation that never was"},
	{"rewind.v1.GroupService/ResetGroup", `{"group":"g","topic":"chaos","target":{"messageId":"not-an-id"}}`, "reset to a malformed message ID"},
	{"rewind.v1.PluginService/UploadPlugin", `{"name":"bomb","module":"AGFzbQEAAAA="}`, "upload a module with no filter export"},
	{"rewind.v1.PluginService/UploadPlugin", `{"name":"bomb","module":"bm90IHdhc20="}`, "upload bytes that are not WebAssembly"},
	{"rewind.v1.PluginService/GetPlugin", `{"ref":"sha256:zz"}`, "a malformed plugin reference"},
	{"rewind.v1.ClusterService/TransferLeader", `{"topic":"chaos","partition":0,"node":"99"}`, "transfer leadership to a node that does not exist"},
	{"rewind.v1.ClusterService/RemoveNode", `{"node":"0"}`, "remove node 0"},
	{"rewind.v1.ClusterService/AddNode", `{"node":"1","address":"not an address"}`, "add a node with a bad address"},
}

// gauntlet sends malformed requests to random running nodes until ctx
// ends and records what each got.
func gauntlet(ctx context.Context, c *cluster, rec *recorder, rng *rand.Rand) {
	// A large body is sent as curl sends it, after "Expect: 100-continue":
	// a server that refuses it unread answers at once, and the body is
	// never sent. Without it an HTTP/1.1 client still writing the body may
	// see the connection close before it reads the answer, and how often
	// depends on the machine's speed.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}
	for k := 0; ctx.Err() == nil; k++ {
		ms := c.members()
		nd := ms[rng.IntN(len(ms))]
		epoch, up := c.epochOf(nd.id)
		if !up {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		rpc, body, ctype, what := gauntletRequest(rng, k)
		code := probe(ctx, hc, nd.addr, rpc, body, ctype)
		if ctx.Err() != nil {
			return
		}
		if now, up := c.epochOf(nd.id); strings.HasPrefix(code, "transport") && (now != epoch || !up) {
			continue // a fault stopped or paused it meanwhile
		}
		rec.probe(history.Probe{Node: nd.id, RPC: rpc, Input: what, Code: code, At: time.Now()})
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond): // pace: a probe every 20 ms
		}
	}
}

// gauntletRequest builds the k-th malformed request.
func gauntletRequest(rng *rand.Rand, k int) (rpc string, body []byte, ctype, what string) {
	switch k % 5 {
	case 0, 1: // a well-formed but wrong request
		j := gauntletJSON[rng.IntN(len(gauntletJSON))]
		return j.rpc, []byte(j.body), "application/json", j.what
	case 2: // random bytes as a protobuf message
		rpc = gauntletRPCs[rng.IntN(len(gauntletRPCs))]
		b := make([]byte, rng.IntN(512)+1)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return rpc, b, "application/proto", fmt.Sprintf("%d random bytes as protobuf", len(b))
	case 3: // JSON that is not the message
		rpc = gauntletRPCs[rng.IntN(len(gauntletRPCs))]
		bad := []string{`{"topic":`, `[1,2,3]`, `{"records":"x"}`, `{"partition":-1}`, `null`, `{"name":{"a":1}}`, "\xff\xfe"}
		b := bad[rng.IntN(len(bad))]
		return rpc, []byte(b), "application/json", fmt.Sprintf("malformed JSON %q", b)
	default: // a truncated or oversized envelope
		rpc = gauntletRPCs[rng.IntN(len(gauntletRPCs))]
		if rng.IntN(2) == 0 {
			return rpc, bytes.Repeat([]byte{0x0a}, 9<<20), "application/proto", "a 9 MiB body"
		}
		return rpc, []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, "application/proto", "a field whose length runs past the end"
	}
}

// probe sends one request (Connect unary, or a server stream for
// Subscribe) and returns the code of the answer.
func probe(ctx context.Context, hc *http.Client, addr, rpc string, body []byte, ctype string) string {
	stream := strings.HasSuffix(rpc, "/Subscribe")
	if stream {
		// A streaming request is one enveloped message.
		env := make([]byte, 5, 5+len(body))
		binary.BigEndian.PutUint32(env[1:], uint32(len(body)))
		body = append(env, body...)
		ctype = strings.Replace(ctype, "application/", "application/connect+", 1)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodPost, "http://"+addr+"/"+rpc, bytes.NewReader(body))
	if err != nil {
		return "transport: " + err.Error()
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Connect-Protocol-Version", "1")
	if len(body) > 1<<20 {
		req.Header.Set("Expect", "100-continue")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "transport: " + err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if stream {
		return streamCode(resp, data)
	}
	if resp.StatusCode == http.StatusOK {
		return "ok"
	}
	var e struct{ Code string }
	if json.Unmarshal(data, &e) == nil && e.Code != "" {
		return e.Code
	}
	return fmt.Sprintf("http %d", resp.StatusCode)
}

// streamCode reads the end of a Connect server stream: the code of its
// end-of-stream message, "ok" without an error.
func streamCode(resp *http.Response, data []byte) string {
	if resp.StatusCode != http.StatusOK {
		var e struct{ Code string }
		if json.Unmarshal(data, &e) == nil && e.Code != "" {
			return e.Code
		}
		return fmt.Sprintf("http %d", resp.StatusCode)
	}
	for len(data) >= 5 {
		flags, n := data[0], binary.BigEndian.Uint32(data[1:5])
		if uint64(len(data)-5) < uint64(n) {
			break
		}
		msg := data[5 : 5+n]
		data = data[5+n:]
		if flags&0x02 != 0 { // end of stream
			var end struct {
				Error *struct{ Code string } `json:"error"`
			}
			if json.Unmarshal(msg, &end) == nil && end.Error != nil {
				return end.Error.Code
			}
			return "ok"
		}
	}
	return "ok" // cut short by the probe's deadline: it was being served
}
