package client

import (
	"testing"
	"time"
)

// TestDefaultRetryOutlastsAnElection: the default policy keeps retrying a
// call for DefaultRetryWindow, whatever its attempt count (an election
// lasts 1–2 s with the server's defaults), and WithPublishRetry alone
// counts attempts only.
func TestDefaultRetryOutlastsAnElection(t *testing.T) {
	t0 := time.Unix(1000, 0)
	if !defaultRetry.more(10, t0, t0.Add(DefaultRetryWindow-time.Millisecond)) {
		t.Error("the default policy stopped within its window")
	}
	if defaultRetry.more(defaultRetry.attempts, t0, t0.Add(DefaultRetryWindow)) {
		t.Error("the default policy went on past its window and attempts")
	}
	if !defaultRetry.more(1, t0, t0.Add(time.Hour)) {
		t.Error("the default policy stopped before its attempts were used")
	}
	var o options
	o.retry = defaultRetry
	WithPublishRetry(3, time.Millisecond, 0)(&o)
	if o.retry.more(3, t0, t0) {
		t.Error("WithPublishRetry(3) alone allowed a fourth attempt")
	}
	WithRetryWindow(time.Minute)(&o)
	if !o.retry.more(3, t0, t0.Add(59*time.Second)) || o.retry.attempts != 3 {
		t.Errorf("WithRetryWindow after WithPublishRetry: %+v", o.retry)
	}
}
