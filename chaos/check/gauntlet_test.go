package check

import (
	"testing"

	"github.com/rewind-io/rewind/chaos/history"
)

// TestGauntletCatchesServerErrorsAndCrashes: client errors pass; an
// Internal answer, a bare HTTP 500 and a node that stopped answering are
// each a violation; no probe is a skip.
func TestGauntletCatchesServerErrorsAndCrashes(t *testing.T) {
	good := &history.History{Probes: []history.Probe{
		{Node: 1, RPC: "rewind.v1.PublishService/Publish", Input: "x", Code: "invalid_argument"},
		{Node: 2, RPC: "rewind.v1.TopicService/ListTopics", Input: "y", Code: "ok"},
		{Node: 3, RPC: "rewind.v1.TopicService/DeleteTopic", Input: "z", Code: "not_found"},
	}}
	if v := Gauntlet(good); !v.OK || v.Stats["probes"] != 3 {
		t.Fatalf("good probes: %+v", v)
	}
	for _, code := range []string{"internal", "unknown", "data_loss", "http 500", "transport: connection refused"} {
		h := &history.History{Probes: append(append([]history.Probe(nil), good.Probes...), history.Probe{Node: 2, RPC: "r", Input: "i", Code: code})}
		if v := Gauntlet(h); v.OK || len(v.Violations) != 1 {
			t.Errorf("%q: %+v", code, v)
		}
	}
	bomb := &history.History{Probes: []history.Probe{{RPC: "rewind.v1.SubscribeService/Subscribe", Input: "filter bomb", Code: "ok", MustFail: true}}}
	if v := Gauntlet(bomb); v.OK {
		t.Error("a filter bomb's replay that succeeded passed")
	}
	bomb.Probes[0].Code = "resource_exhausted"
	if v := Gauntlet(bomb); !v.OK {
		t.Errorf("a filter bomb stopped with resource_exhausted: %+v", v)
	}
	if v := Gauntlet(&history.History{}); !v.OK || v.Skipped == "" {
		t.Errorf("no probes: %+v", v)
	}
}
