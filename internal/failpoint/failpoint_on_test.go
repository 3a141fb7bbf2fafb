//go:build failpoints

package failpoint

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// reset clears every failpoint when the test ends (and before it).
func reset(t *testing.T) {
	t.Helper()
	change(func(m map[string]setting) { clear(m) })
	t.Cleanup(func() { change(func(m map[string]setting) { clear(m) }) })
}

func TestSetValidates(t *testing.T) {
	reset(t)
	for _, tc := range []struct{ name, value, wantErr string }{
		{"no-such", "", "unknown failpoint \"no-such\"; known: bitflip,"},
		{FsyncDelay, "soon", "needs a delay"},
		{FsyncDelay, "-1s", "needs a delay"},
		{ClockOffset, "", "needs a signed duration"},
		{ClockOffset, "+5", "needs a signed duration"},
		{FsyncEIO, "maybe", "takes no value"},
	} {
		if err := Set(tc.name, tc.value); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Set(%q, %q) = %v, want %q", tc.name, tc.value, err, tc.wantErr)
		}
	}
	if len(Active()) != 0 {
		t.Fatalf("a refused Set set something: %v", Active())
	}
	for _, tc := range []struct {
		name, value string
		dur         time.Duration
	}{
		{FsyncDelay, "", 200 * time.Millisecond},
		{FsyncDelay, "50ms", 50 * time.Millisecond},
		{ClockOffset, "+5m", 5 * time.Minute},
		{ClockOffset, "-5m", -5 * time.Minute},
	} {
		if err := Set(tc.name, tc.value); err != nil {
			t.Fatal(err)
		}
		if d, ok := duration(tc.name); !ok || d != tc.dur {
			t.Errorf("%s=%s: duration %v %v, want %v", tc.name, tc.value, d, ok, tc.dur)
		}
	}
	Clear(FsyncDelay)
	if Enabled(FsyncDelay) || !Enabled(ClockOffset) {
		t.Fatalf("after Clear: %v", Active())
	}
}

func TestSetListAllOrNothing(t *testing.T) {
	reset(t)
	if err := setList("power-loss; fsync-delay=10ms;;"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{PowerLoss: "on", FsyncDelay: "10ms"}, Active()); diff != "" {
		t.Fatalf("active (-want +got):\n%s", diff)
	}
	if err := setList("enospc;clock-offset=sideways"); err == nil {
		t.Fatal("a bad list was accepted")
	}
	if Enabled(ENOSPC) {
		t.Fatal("a refused list set part of itself")
	}
}

func TestTakeFiresOnce(t *testing.T) {
	reset(t)
	if err := Set(TornWrite, ""); err != nil {
		t.Fatal(err)
	}
	if !take(TornWrite) || take(TornWrite) || Enabled(TornWrite) {
		t.Fatal("a one-shot failpoint fired more than once")
	}
}

func TestClockOffset(t *testing.T) {
	reset(t)
	base := time.Unix(1_000_000, 0)
	clock := Clock(func() time.Time { return base })
	if !clock().Equal(base) {
		t.Fatal("clock shifted with no failpoint set")
	}
	if err := Set(ClockOffset, "-5m"); err != nil {
		t.Fatal(err)
	}
	if got := clock(); !got.Equal(base.Add(-5 * time.Minute)) {
		t.Fatalf("clock %v, want 5 minutes before %v", got, base)
	}
}

func TestHandler(t *testing.T) {
	reset(t)
	h := Handler()
	do := func(method, target, body string) (int, string) {
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	active := func(body string) map[string]string {
		t.Helper()
		var v struct {
			Active map[string]string `json:"active"`
			Known  []string          `json:"known"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if len(v.Known) != len(Names()) {
			t.Fatalf("known %v", v.Known)
		}
		return v.Active
	}
	code, body := do(http.MethodPost, Path, url.Values{FsyncDelay: {"20ms"}, PowerLoss: {""}}.Encode())
	if code != http.StatusOK {
		t.Fatalf("POST: %d %s", code, body)
	}
	if diff := cmp.Diff(map[string]string{FsyncDelay: "20ms", PowerLoss: "on"}, active(body)); diff != "" {
		t.Fatalf("after POST (-want +got):\n%s", diff)
	}
	code, body = do(http.MethodPut, Path+"?enospc", "")
	if code != http.StatusOK || !Enabled(ENOSPC) {
		t.Fatalf("PUT with a query: %d %s", code, body)
	}
	for _, bad := range []struct{ method, target, body, want string }{
		{http.MethodPost, Path, "", "nothing to set"},
		{http.MethodPost, Path, "fsync-eio=on&nope=1", "unknown failpoint \"nope\""},
		{http.MethodPost, Path, "clock-offset=later", "needs a signed duration"},
		{http.MethodPost, Path, "%zz", "bad form"},
		{http.MethodDelete, Path + "/nope", "", "unknown failpoint"},
	} {
		code, body := do(bad.method, bad.target, bad.body)
		if code != http.StatusBadRequest || !strings.Contains(body, bad.want) {
			t.Errorf("%s %s %q: %d %q, want 400 %q", bad.method, bad.target, bad.body, code, body, bad.want)
		}
	}
	if Enabled(FsyncEIO) {
		t.Fatal("a refused POST set part of itself")
	}
	if code, _ := do(http.MethodPatch, Path, ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("PATCH: %d", code)
	}
	code, body = do(http.MethodDelete, Path+"/"+PowerLoss, "")
	if diff := cmp.Diff(map[string]string{FsyncDelay: "20ms", ENOSPC: "on"}, active(body)); code != http.StatusOK || diff != "" {
		t.Fatalf("DELETE one: %d (-want +got):\n%s", code, diff)
	}
	code, body = do(http.MethodDelete, Path+"?name="+FsyncDelay, "")
	if diff := cmp.Diff(map[string]string{ENOSPC: "on"}, active(body)); code != http.StatusOK || diff != "" {
		t.Fatalf("DELETE ?name: %d (-want +got):\n%s", code, diff)
	}
	code, body = do(http.MethodDelete, Path, "")
	if code != http.StatusOK || len(active(body)) != 0 || Enabled(ENOSPC) {
		t.Fatalf("DELETE all: %d %s", code, body)
	}
	_, body = do(http.MethodGet, Path, "")
	if len(active(body)) != 0 {
		t.Fatalf("GET: %s", body)
	}
}

// TestPauseHoldsTheFirstGoroutineUntilCleared: a set pause point holds the
// first goroutine to reach it (Reached tells when) until it is cleared;
// another reaching it meanwhile passes, and nothing pauses once cleared.
func TestPauseHoldsTheFirstGoroutineUntilCleared(t *testing.T) {
	reset(t)
	Pause(TierUploaded) // not set: returns
	if err := Set(TierUploaded, ""); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		Pause(TierUploaded)
		close(released)
	}()
	<-Reached(TierUploaded)
	Pause(TierUploaded) // a second goroutine passes while the first is held
	select {
	case <-released:
		t.Fatal("the paused goroutine went on while the pause was set")
	default:
	}
	if err := Set(FsyncDelay, "1ms"); err != nil { // another change does not release it
		t.Fatal(err)
	}
	Clear(FsyncDelay)
	select {
	case <-released:
		t.Fatal("the paused goroutine went on after another failpoint changed")
	default:
	}
	Clear(TierUploaded)
	<-released
	Pause(TierUploaded)
	// Set again: a fresh Reached channel.
	if err := Set(TierUploaded, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case <-Reached(TierUploaded):
		t.Fatal("Reached before any goroutine reached the new setting")
	default:
	}
	Clear(TierUploaded)
}
