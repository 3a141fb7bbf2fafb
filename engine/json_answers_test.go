package engine_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestJSONAnswersCarryZeroValues: a Connect JSON client publishing the
// first record of partition 0 reads "partition": 0 and "offset": "0" in
// the answer (protojson's default left both out, so the answer looked
// like one without a position).
func TestJSONAnswersCarryZeroValues(t *testing.T) {
	url := enginetest.StartNode(t, engine.Config{}).URL
	post := func(proc, body string) map[string]any {
		t.Helper()
		resp, err := http.Post(url+"/rewind.v1."+proc, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", proc, resp.StatusCode, b)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: %v: %s", proc, err, b)
		}
		return out
	}
	post("TopicService/CreateTopic", `{"name":"j","config":{"partitions":1}}`)
	out := post("PublishService/Publish", `{"topic":"j","records":[{"value":"dg=="}]}`)
	results, _ := out["results"].([]any)
	if len(results) != 1 {
		t.Fatalf("answer %v: want one result", out)
	}
	r := results[0].(map[string]any)
	if p, ok := r["partition"]; !ok || p != float64(0) {
		t.Errorf("result %v: want \"partition\": 0", r)
	}
	if o, ok := r["offset"]; !ok || o != "0" {
		t.Errorf("result %v: want \"offset\": \"0\"", r)
	}
	if d, ok := r["duplicate"]; !ok || d != false {
		t.Errorf("result %v: want \"duplicate\": false", r)
	}
}
