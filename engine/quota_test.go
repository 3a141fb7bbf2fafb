package engine_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
)

// TestQuotas: on a server with --auth, a principal over its publish rate
// is refused with ResourceExhausted and told how long to wait, over its
// stream cap a new stream is refused, and over its replay rate a replay is
// paced, not failed (the node reports the time it held it back); live
// reads and other principals are not charged, and a quota set to zero is
// gone at once.
func TestQuotas(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := a.client(a.root)
	if _, err := root.CreateTopic(ctx, "q", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	tok := a.user(t, "tenant", "allow publish,read,replay,describe topic:q")
	other := a.user(t, "other", "allow publish,read,replay,describe topic:q")
	if err := root.SetQuota(ctx, "tenant", &client.Quota{PublishBytesPerSec: 100, ReplayBytesPerSec: 3000, Streams: 1}); err != nil {
		t.Fatal(err)
	}
	c := a.client(tok)
	big := make([]client.Message, 10)
	for i := range big {
		big[i].Value = make([]byte, 300) // 3,000 bytes a publish
	}
	// A full bucket (one second of the rate) admits the first publish, which
	// takes it 2,900 bytes into debt: 29 s at 100 B/s, far more than any
	// machine takes to the next call, which is refused with the wait.
	if _, err := c.Publish(ctx, "q", big...); err != nil {
		t.Fatal(err)
	}
	_, err := client.New(a.url, client.WithToken(tok), client.WithPublishRetry(1, 0, 10*time.Second)).Publish(ctx, "q", big...)
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
		t.Fatalf("a publish over the quota: %v, want ResourceExhausted", err)
	}
	if ms, err := strconv.Atoi(ce.Meta().Get("Rewind-Retry-After-Ms")); err != nil || ms <= 0 {
		t.Fatalf("the refusal says to wait %q", ce.Meta().Get("Rewind-Retry-After-Ms"))
	}
	// Another principal is not held back.
	for range 3 {
		if _, err := a.client(other).Publish(ctx, "q", big...); err != nil {
			t.Fatalf("another principal was refused: %v", err)
		}
	}
	// One stream at a time: a live stream holds the slot.
	live, err := c.Subscribe(ctx, "q", client.From(client.Latest()))
	if err != nil {
		t.Fatal(err)
	}
	if !live.Next() {
		t.Fatal(live.Err())
	}
	second, err := c.Subscribe(ctx, "q", client.From(client.Earliest()), client.Until(client.End()), client.ReconnectWithin(0))
	if err == nil {
		for second.Next() {
		}
		err = second.Err()
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("a second stream over the cap of 1: %v, want ResourceExhausted", err)
	}
	live.Close()
	// The replay of 12 KB of history at 3 KB/s: paced (9 KB beyond the
	// burst: about 3 s, against the milliseconds the read takes), complete.
	var n int
	var early uint64 // refusals while the live stream's slot was not released yet
	for {
		sub, err := c.Subscribe(ctx, "q", client.From(client.Earliest()), client.Until(client.End()))
		if connect.CodeOf(err) == connect.CodeResourceExhausted {
			early++ // the live stream's slot is released a moment after its close
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for sub.Next() {
			if r, ok := sub.Event().(*client.Records); ok {
				n += len(r.Records)
			}
		}
		if err := sub.Err(); err != nil {
			t.Fatal(err)
		}
		break
	}
	if n != 40 {
		t.Fatalf("the paced replay delivered %d records, want 40", n)
	}
	qs, err := root.ListQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var paced time.Duration
	var refused uint64
	for _, u := range qs.GetUsage() {
		if u.GetPrincipal() == "tenant" {
			paced, refused = u.GetPaced().AsDuration(), u.GetRefused()
		}
		if u.GetPrincipal() == "other" && u.GetPaced().AsDuration() != 0 {
			t.Fatalf("another principal was paced: %v", u)
		}
	}
	if paced <= 0 || refused != 2+early {
		t.Fatalf("tenant: paced %s, refused %d; want paced and %d refusals (a publish, a stream, %d streams opened before the live one's slot was released)", paced, refused, 2+early, early)
	}
	// Filter fuel: a filtered replay of a principal with a fuel quota is
	// charged what its module burned (and paced over the rate).
	if _, _, err := root.UploadPlugin(ctx, "none", filterModule, ""); err != nil {
		t.Fatal(err)
	}
	fueled := a.user(t, "fueled", "allow replay,describe topic:q", "allow use plugin:none")
	if err := root.SetQuota(ctx, "fueled", &client.Quota{FilterFuelPerSec: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	sub, err := a.client(fueled).Subscribe(ctx, "q", client.From(client.Earliest()), client.Until(client.End()), client.Filter("none", nil))
	if err != nil {
		t.Fatal(err)
	}
	for sub.Next() {
	}
	if err := sub.Err(); err != nil {
		t.Fatal(err)
	}
	qs, err = root.ListQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fuel uint64
	for _, u := range qs.GetUsage() {
		if u.GetPrincipal() == "fueled" {
			fuel = u.GetFilterFuel()
		}
	}
	if fuel == 0 {
		t.Fatal("a filtered replay charged no fuel")
	}
	// And /metrics shows it (with the cluster admin right).
	req, _ := http.NewRequest(http.MethodGet, a.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+a.root)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `rewind_quota_refused_total{principal="tenant"} 2`) ||
		!strings.Contains(string(body), `rewind_quota_filter_fuel_total{principal="fueled"}`) {
		t.Fatalf("/metrics lacks the quota families:\n%s", body)
	}
	// Removed: the publish goes through at once.
	if err := root.SetQuota(ctx, "tenant", &client.Quota{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(a.url, client.WithToken(tok), client.WithPublishRetry(1, 0, 10*time.Second)).Publish(ctx, "q", big...); err != nil {
		t.Fatalf("with the quota removed: %v", err)
	}
}

// TestTraceStampIsCharged: the trace context a publish asks the server to
// store in its records (Rewind-Record-Trace) is charged to the publisher
// like the bytes it sent, so it cannot make the server store more than
// its quota admits.
func TestTraceStampIsCharged(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := a.client(a.root)
	if _, err := root.CreateTopic(ctx, "tr", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	tok := a.user(t, "tracer", "allow publish topic:tr")
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	published := func() uint64 {
		t.Helper()
		q, err := root.ListQuotas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range q.GetUsage() {
			if u.GetPrincipal() == "tracer" {
				return u.GetPublishedBytes()
			}
		}
		return 0
	}
	for _, stamp := range []bool{false, true} {
		before := published()
		// Ten records of one byte ("YQ==" is "a").
		body := `{"topic":"tr","records":[` + strings.Repeat(`{"value":"YQ=="},`, 9) + `{"value":"YQ=="}]}`
		req, _ := http.NewRequest(http.MethodPost, a.url+"/rewind.v1.PublishService/Publish", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("traceparent", parent)
		if stamp {
			req.Header.Set("Rewind-Record-Trace", "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("publish: %d %s", resp.StatusCode, msg)
		}
		want := uint64(10) // the values
		if stamp {
			want += 10 * uint64(len("traceparent")+len(parent))
		}
		if got := published() - before; got != want {
			t.Errorf("stamp %v: the publish was charged %d bytes, want %d", stamp, got, want)
		}
	}
}
