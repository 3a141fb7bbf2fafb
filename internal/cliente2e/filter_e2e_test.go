package cliente2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/guest/build"
)

var guestModules sync.Map

// guest builds a guest module from source once per test binary: "go/NAME"
// (sdk/guest/examples/go) or "as/NAME" (sdk/guest/assemblyscript, examples
// and hostile modules).
func guest(t testing.TB, ref string) []byte {
	t.Helper()
	if b, ok := guestModules.Load(ref); ok {
		return b.([]byte)
	}
	lang, name, _ := strings.Cut(ref, "/")
	var b []byte
	var err error
	if lang == "go" {
		b, err = build.Go(context.Background(), filepath.Join("..", "..", "sdk", "guest", "examples", "go", name))
	} else {
		b, err = build.AssemblyScript(filepath.Join("..", "..", "sdk", "guest", "assemblyscript"), name)
	}
	if err != nil {
		t.Fatalf("build %s: %v", ref, err)
	}
	guestModules.Store(ref, b)
	return b
}

// event is a test record published with a JSON value.
type event struct {
	Type string `json:"type"`
	ID   int    `json:"id"`
	Card string `json:"card,omitempty"`
}

// publishEvents publishes n records with random keys and JSON values to
// topic and returns them as replayed without a filter.
func publishEvents(t *testing.T, c *client.Client, topic string, n int, seed uint64) []client.Record {
	t.Helper()
	rnd := rand.New(rand.NewPCG(seed, 7))
	types := []string{"order.created", "order.paid", "order.shipped", "user.signup"}
	msgs := make([]client.Message, n)
	for i := range msgs {
		v, _ := json.Marshal(event{Type: types[rnd.IntN(len(types))], ID: i, Card: []string{"", "4111-1111"}[rnd.IntN(2)]})
		msgs[i] = client.Message{
			Key:            []byte(fmt.Sprintf("user-%d", rnd.IntN(30))),
			Value:          v,
			IdempotencyKey: fmt.Sprintf("idem-%d-%d", seed, i),
			Headers:        []client.Header{{Key: "source", Value: []byte([]string{"web", "app"}[rnd.IntN(2)])}},
		}
	}
	for i := 0; i < n; i += 500 {
		if _, err := c.Publish(context.Background(), topic, msgs[i:min(n, i+500)]...); err != nil {
			t.Fatal(err)
		}
	}
	return readAll(t, c, topic, client.Until(client.End()))
}

// ident is what a filter must keep of a record: where it is and who
// published it.
type ident struct {
	Partition  uint32
	Offset     uint64
	MessageID  string
	Idem       string
	Key, Value string
}

func identsOf(rs []client.Record) map[uint32][]ident {
	out := map[uint32][]ident{}
	for _, r := range rs {
		out[r.Partition] = append(out[r.Partition], ident{r.Partition, r.Offset, r.MessageID, r.IdempotencyKey, string(r.Key), string(r.Value)})
	}
	return out
}

func where(rs []client.Record, keep func(client.Record) bool) []client.Record {
	var out []client.Record
	for _, r := range rs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// TestFilteredReplayEqualsGoPredicate is the differential test: for random
// predicates, a filtered replay in either guest language delivers exactly
// the unfiltered replay with the same predicate applied in Go, per
// partition, in order, with offsets, message IDs and idempotency keys.
func TestFilteredReplayEqualsGoPredicate(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "orders", client.WithPartitions(4)); err != nil {
		t.Fatal(err)
	}
	all := publishEvents(t, c, "orders", 3000, 1)
	for _, lang := range []string{"go", "as"} {
		for _, name := range []string{"keyprefix", "jsonfield", "sample"} {
			if _, _, err := c.UploadPlugin(ctx, lang+"-"+name, guest(t, lang+"/"+name), ""); err != nil {
				t.Fatalf("upload %s/%s: %v", lang, name, err)
			}
		}
	}
	rnd := rand.New(rand.NewPCG(2, 2))
	for i := range 12 {
		lang := []string{"go", "as"}[i%2]
		var plugin, config string
		var keep func(client.Record) bool
		switch i / 2 % 3 {
		case 0:
			prefix := fmt.Sprintf("user-%d", rnd.IntN(12))
			plugin, config = lang+"-keyprefix", fmt.Sprintf(`{"prefix":%q}`, prefix)
			keep = func(r client.Record) bool { return bytes.HasPrefix(r.Key, []byte(prefix)) }
		case 1:
			typ := []string{"order.created", "order.paid", "nope"}[rnd.IntN(3)]
			plugin, config = lang+"-jsonfield", fmt.Sprintf(`{"field":"type","equals":%q}`, typ)
			keep = func(r client.Record) bool {
				var e event
				return json.Unmarshal(r.Value, &e) == nil && e.Type == typ
			}
		case 2:
			n := 1 + rnd.IntN(20)
			plugin, config = lang+"-sample", fmt.Sprintf(`{"n":%d}`, n)
			keep = func(r client.Record) bool { return r.Offset%uint64(n) == 0 }
		}
		t.Run(plugin+" "+config, func(t *testing.T) {
			sub, err := c.Subscribe(ctx, "orders", client.Until(client.End()), client.Filter(plugin, []byte(config)))
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			var got []client.Record
			st, ok := sub.Event().(*client.Started)
			if !ok || st.FilterModule == "" {
				t.Fatalf("first event %#v does not name the filter module", sub.Event())
			}
			module := st.FilterModule
			for sub.Next() {
				switch e := sub.Event().(type) {
				case *client.Records:
					if e.FilterModule != module {
						t.Fatalf("records from module %q, stream runs %q", e.FilterModule, module)
					}
					got = append(got, e.Records...)
				case *client.Progress:
					if e.FilterModule != module {
						t.Fatalf("progress names module %q, stream runs %q", e.FilterModule, module)
					}
				}
			}
			if err := sub.Err(); err != nil {
				t.Fatal(err)
			}
			want := identsOf(where(all, keep))
			if diff := cmp.Diff(want, identsOf(got)); diff != "" {
				t.Fatalf("filtered replay differs from the Go predicate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTransformKeepsIdentity checks a transform over Connect: values are
// rewritten, and partition, offset, message ID, idempotency key and order
// are the stored record's.
func TestTransformKeepsIdentity(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "cards", client.WithPartitions(3)); err != nil {
		t.Fatal(err)
	}
	all := publishEvents(t, c, "cards", 800, 3)
	for _, lang := range []string{"go", "as"} {
		got := readAll(t, c, "cards", client.Until(client.End()),
			client.InlineFilter(guest(t, lang+"/redact"), []byte(`{"field":"card","with":"***"}`)))
		if len(got) != len(all) {
			t.Fatalf("%s: %d records, want %d", lang, len(got), len(all))
		}
		want := make([]client.Record, len(all))
		for i, r := range all {
			want[i] = r
			var m map[string]any
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Fatal(err)
			}
			if _, ok := m["card"]; ok {
				want[i].Value = bytes.Replace(r.Value, []byte(`"card":"4111-1111"`), []byte(`"card":"***"`), 1)
			}
		}
		if diff := cmp.Diff(identsOf(want), identsOf(got)); diff != "" {
			t.Fatalf("%s: redacted replay (-want +got):\n%s", lang, diff)
		}
	}
}

// TestPluginRegistry walks the PluginService: upload, versions, refs,
// get, test, delete, and the errors of each.
func TestPluginRegistry(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	kp, jf := guest(t, "go/keyprefix"), guest(t, "as/jsonfield")

	p1, unchanged, err := c.UploadPlugin(ctx, "orders", kp, "key prefix")
	if err != nil || unchanged || p1.Version != 1 || p1.Size != uint64(len(kp)) || !strings.HasPrefix(p1.Module, "sha256:") {
		t.Fatalf("first upload: %+v, unchanged %v, %v", p1, unchanged, err)
	}
	if again, unchanged, err := c.UploadPlugin(ctx, "orders", kp, ""); err != nil || !unchanged || again.Version != 1 {
		t.Fatalf("same bytes again: %+v, unchanged %v, %v; want version 1 unchanged", again, unchanged, err)
	}
	p2, _, err := c.UploadPlugin(ctx, "orders", jf, "json field")
	if err != nil || p2.Version != 2 || p2.Module == p1.Module {
		t.Fatalf("second version: %+v, %v", p2, err)
	}
	list, err := c.ListPlugins(ctx, "")
	if err != nil || len(list) != 2 || list[0].Ref() != "orders@1" || list[1].Ref() != "orders@2" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	for ref, want := range map[string]string{"orders": p2.Module, "orders@1": p1.Module, p1.Module: p1.Module} {
		got, mod, err := c.GetPlugin(ctx, ref, true)
		if err != nil || got.Module != want {
			t.Fatalf("get %s: %+v, %v; want module %s", ref, got, err, want)
		}
		if want == p1.Module && !bytes.Equal(mod, kp) {
			t.Fatalf("get %s returned %d bytes, not the uploaded module", ref, len(mod))
		}
	}

	// Refused uploads say why, and store nothing.
	for _, bad := range []struct {
		name   string
		module []byte
		want   string
	}{
		{"garbage", []byte("not wasm"), "does not parse"},
		{"loop-but-forbidden", guest(t, "as/pathopen"), "no filesystem"},
		{"bad name!", kp, "name"},
	} {
		_, _, err := c.UploadPlugin(ctx, bad.name, bad.module, "")
		if code(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("upload %s: %v; want InvalidArgument mentioning %q", bad.name, err, bad.want)
		}
	}
	if list, _ := c.ListPlugins(ctx, ""); len(list) != 2 {
		t.Errorf("refused uploads were stored: %+v", list)
	}
	// What only compiling finds (here: the exports) is found after the
	// upload, which compiles in the background: the module is registered
	// and marked failed, and a replay naming it says why.
	if _, _, err := c.UploadPlugin(ctx, "wrongabi", guest(t, "as/wrongabi"), ""); err != nil {
		t.Fatalf("upload wrongabi: %v", err)
	}
	if _, err := c.CreateTopic(ctx, "w", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	if err := subscribeErr(c, "w", client.Filter("wrongabi", nil)); code(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "rewind_abi_v1") {
		t.Errorf("subscribe with a module that does not compile: %v; want InvalidArgument mentioning rewind_abi_v1", err)
	}
	if p, _, err := c.GetPlugin(ctx, "wrongabi", false); err != nil || p.CompileState != "failed" || !strings.Contains(p.CompileError, "rewind_abi_v1") {
		t.Errorf("get wrongabi: %+v, %v; want compile state failed, mentioning rewind_abi_v1", p, err)
	}
	if _, err := c.DeletePlugin(ctx, "wrongabi"); err != nil {
		t.Fatal(err)
	}

	// Test over sample records and over a topic range.
	rep, err := c.TestPlugin(ctx, "orders@1", nil, []byte(`{"prefix":"a"}`), client.TestSource{Records: []client.Record{
		{Offset: 1, Key: []byte("abc")}, {Offset: 2, Key: []byte("xyz")}, {Offset: 3, Key: []byte("a")},
	}})
	if err != nil || rep.Scanned != 3 || rep.Kept != 2 || len(rep.Results) != 3 || len(rep.Results[1].Outputs) != 0 || rep.Module != p1.Module {
		t.Fatalf("test on samples: %+v, %v", rep, err)
	}
	if len(rep.Results[0].Replaced) != 1 || rep.Results[0].Replaced[0] {
		t.Errorf("a kept record reports Replaced %v, want [false]", rep.Results[0].Replaced)
	}
	// Once it ran, the module is compiled, and its buffer sizes known.
	if p, _, err := c.GetPlugin(ctx, "orders@1", false); err != nil || p.CompileState != "compiled" || p.InputBufferBytes == 0 || p.CompileError != "" {
		t.Errorf("get orders@1 after a test: %+v, %v; want it compiled, with its buffer sizes", p, err)
	}
	rep, err = c.TestPlugin(ctx, "", guest(t, "as/redact"), []byte(`{"field":"card"}`), client.TestSource{Records: []client.Record{
		{Offset: 1, Value: []byte(`{"card":"4111"}`)}, {Offset: 2, Value: []byte(`{"id":1}`)},
	}})
	if err != nil || len(rep.Results) != 2 ||
		!slices.Equal(rep.Results[0].Replaced, []bool{true}) || string(rep.Results[0].Outputs[0].Value) != `{"card":"***"}` ||
		!slices.Equal(rep.Results[1].Replaced, []bool{false}) {
		t.Fatalf("test of a transform: %+v, %v; want a replacement, then the input unchanged", rep, err)
	}
	// A module failing in the middle: the results stop before the failing
	// call (256 records per call), which the failure names.
	samples := make([]client.Record, 600)
	for i := range samples {
		samples[i] = client.Record{Offset: uint64(i), Key: []byte("k")}
	}
	rep, err = c.TestPlugin(ctx, "", guest(t, "as/failat"), []byte(`{"offset":400}`), client.TestSource{Records: samples})
	if err != nil || rep.Failure == nil || rep.Failure.GetOffset() != 256 || len(rep.Results) != 256 || rep.Results[255].Input.Offset != 255 {
		t.Fatalf("test of a module failing at offset 400: %d results, failure %+v, %v; want 256 results and a failure at 256", len(rep.Results), rep.Failure, err)
	}
	if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	all := publishEvents(t, c, "t", 200, 5)
	rep, err = c.TestPlugin(ctx, "", jf, []byte(`{"field":"type","equals":"order.paid"}`), client.TestSource{Topic: "t", Limit: 1000})
	if err != nil || rep.Scanned != uint64(len(all)) {
		t.Fatalf("test on the topic: %+v, %v", rep, err)
	}
	paid := where(all, func(r client.Record) bool { return bytes.Contains(r.Value, []byte(`"order.paid"`)) })
	if rep.Kept != uint64(len(paid)) {
		t.Errorf("test on the topic kept %d, want %d", rep.Kept, len(paid))
	}
	rep, err = c.TestPlugin(ctx, "", guest(t, "as/loop"), nil, client.TestSource{Topic: "t"})
	if err != nil || rep.Failure == nil || rep.Failure.GetFailure() != rewindv1.FilterFailure_FILTER_FAILURE_FUEL {
		t.Errorf("test of an endless loop: %+v, %v; want a fuel failure in the report", rep, err)
	}

	// Delete one version, then the rest.
	if del, err := c.DeletePlugin(ctx, "orders@1"); err != nil || len(del) != 1 || del[0].Version != 1 {
		t.Fatalf("delete orders@1: %+v, %v", del, err)
	}
	if _, _, err := c.GetPlugin(ctx, "orders@1", false); code(err) != connect.CodeNotFound {
		t.Errorf("get a deleted version: %v, want NotFound", err)
	}
	if err := subscribeErr(c, "t", client.Filter("orders@1", nil)); code(err) != connect.CodeNotFound {
		t.Errorf("subscribe with a deleted version: %v, want NotFound", err)
	}
	if del, err := c.DeletePlugin(ctx, "orders"); err != nil || len(del) != 1 {
		t.Fatalf("delete orders: %+v, %v", del, err)
	}
	if _, err := c.DeletePlugin(ctx, "orders"); code(err) != connect.CodeNotFound {
		t.Errorf("delete again: %v, want NotFound", err)
	}
}

// subscribeErr returns the error that ends a subscription (nil if it ends
// cleanly).
func subscribeErr(c *client.Client, topic string, opts ...client.SubscribeOption) error {
	sub, err := c.Subscribe(context.Background(), topic, append(opts, client.Until(client.End()))...)
	if err != nil {
		return err
	}
	defer sub.Close()
	for sub.Next() {
	}
	return sub.Err()
}

// TestHostileFiltersEndOnlyTheirStreams runs four hostile filters at once
// while records are published and read live: each hostile stream ends with
// its error naming the module, partition and offset, every publish is
// acknowledged and the live reader gets every record in order.
func TestHostileFiltersEndOnlyTheirStreams(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "h", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	publishEvents(t, c, "h", 2000, 9)

	live, err := c.Subscribe(ctx, "h", client.From(client.Latest()))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()

	hostile := map[string]connect.Code{
		"loop": connect.CodeResourceExhausted, "slow": connect.CodeResourceExhausted,
		"recursion": connect.CodeAborted, "membomb": connect.CodeAborted,
	}
	var wg sync.WaitGroup
	errs := make(map[string]error)
	var mu sync.Mutex
	for name := range hostile {
		wasm := guest(t, "as/"+name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := subscribeErr(c, "h", client.InlineFilter(wasm, nil))
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		}()
	}
	// Publish while they run; every publish is acknowledged.
	const n = 200
	for i := range n {
		if _, err := c.Publish(ctx, "h", client.Message{Key: []byte("live"), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("publish %d during hostile replays: %v", i, err)
		}
	}
	wg.Wait()
	for name, want := range hostile {
		err := errs[name]
		fe := client.FilterFailureOf(err)
		if code(err) != want || fe == nil {
			t.Errorf("%s: %v; want %v with a FilterError", name, err, want)
			continue
		}
		// The slow filter gets through a first small batch; the others
		// fail on their first.
		if fe.GetModule() != "sha256:"+sha(guest(t, "as/"+name)) || fe.GetPartition() > 1 || (fe.GetOffset() != 0 && name != "slow") || fe.GetResumeToken() == "" {
			t.Errorf("%s: FilterError %+v; want this module, partition 0 or 1, offset 0 and a resume token", name, fe)
		}
	}
	// The live reader got every record published meanwhile, in order.
	var got []string
	for len(got) < n && live.Next() {
		if r, ok := live.Event().(*client.Records); ok {
			for _, rec := range r.Records {
				got = append(got, string(rec.Value))
			}
		}
	}
	for i := range n {
		if i >= len(got) || got[i] != fmt.Sprint(i) {
			t.Fatalf("live reader got %d records, %v...; want 0..%d in order (err %v)", len(got), got[:min(5, len(got))], n-1, live.Err())
		}
	}
}

// TestResumeAfterFilterFailure fails a filter in the middle of a replay
// and resumes from the error's resume token: together the two streams
// deliver every record once, in order.
func TestResumeAfterFilterFailure(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "r", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	all := publishEvents(t, c, "r", 5000, 11)
	sub, err := c.Subscribe(ctx, "r", client.Until(client.End()), client.InlineFilter(guest(t, "as/failat"), []byte(`{"offset":3000}`)))
	if err != nil {
		t.Fatal(err)
	}
	var first []client.Record
	for sub.Next() {
		if r, ok := sub.Event().(*client.Records); ok {
			first = append(first, r.Records...)
		}
	}
	fe := client.FilterFailureOf(sub.Err())
	sub.Close()
	if code(sub.Err()) != connect.CodeAborted || fe == nil || fe.GetFailure() != rewindv1.FilterFailure_FILTER_FAILURE_TRAP {
		t.Fatalf("stream error %v; want Aborted with a trap FilterError", sub.Err())
	}
	if !strings.Contains(fe.GetReason(), "failat: reached the failing offset") || fe.GetOffset() > 3000 || uint64(len(first)) != fe.GetOffset() {
		t.Fatalf("FilterError %+v after %d records; want the abort message and offset = records delivered <= 3000", fe, len(first))
	}
	rest := readAll(t, c, "r", client.From(client.ResumeToken(fe.GetResumeToken())), client.Until(client.End()),
		client.InlineFilter(guest(t, "as/keyprefix"), []byte(`{"prefix":""}`)))
	if diff := cmp.Diff(identsOf(all), identsOf(append(first, rest...))); diff != "" {
		t.Fatalf("delivered before and after the failure (-want +got):\n%s", diff)
	}
}

// TestFilteredGroupStream runs a filter in a subscriber group's stream.
func TestFilteredGroupStream(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "g", client.WithPartitions(3)); err != nil {
		t.Fatal(err)
	}
	all := publishEvents(t, c, "g", 600, 13)
	want := where(all, func(r client.Record) bool { return bytes.HasPrefix(r.Key, []byte("user-1")) })
	sub, err := c.Subscribe(ctx, "g", client.Group("readers"), client.From(client.Earliest()),
		client.InlineFilter(guest(t, "go/keyprefix"), []byte(`{"prefix":"user-1"}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []client.Record
	for len(got) < len(want) && sub.Next() {
		if r, ok := sub.Event().(*client.Records); ok {
			got = append(got, r.Records...)
		}
	}
	if diff := cmp.Diff(identsOf(want), identsOf(got)); diff != "" {
		t.Fatalf("filtered group stream (-want +got):\n%s", diff)
	}
}

// TestInlineModuleErrors checks the errors of inline modules and configs.
func TestInlineModuleErrors(t *testing.T) {
	s := startServerWith(t, engine.Config{MaxInlineModuleBytes: 64 << 10})
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "e", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	publishEvents(t, c, "e", 10, 15)
	for _, bad := range []struct {
		name string
		opt  client.SubscribeOption
		code connect.Code
		want string
	}{
		{"too large", client.InlineFilter(guest(t, "go/keyprefix"), []byte(`{"prefix":""}`)), connect.CodeInvalidArgument, "bytes"},
		{"garbage", client.InlineFilter([]byte("\x00asm garbage"), nil), connect.CodeInvalidArgument, "does not parse"},
		// The module's own message comes back (not only in the server's log).
		{"bad config", client.InlineFilter(guest(t, "as/keyprefix"), []byte(`{"prefix":7}`)), connect.CodeInvalidArgument, `rewind_init returned 1: the module refused its config: keyprefix: "prefix" must be a JSON string`},
		{"unknown plugin", client.Filter("nope", nil), connect.CodeNotFound, "nope"},
		{"bad ref", client.Filter("a@b@c", nil), connect.CodeInvalidArgument, ""},
	} {
		err := subscribeErr(c, "e", bad.opt)
		if code(err) != bad.code || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v; want %v mentioning %q", bad.name, err, bad.code, bad.want)
		}
		if bad.name == "bad config" {
			fe := client.FilterFailureOf(err)
			if fe.GetFailure() != rewindv1.FilterFailure_FILTER_FAILURE_CONFIG || !strings.Contains(fe.GetReason(), bad.want) {
				t.Errorf("bad config: detail %v; want failure CONFIG with the module's message", fe)
			}
		}
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestFilterDeterminism replays one range through the project transform
// repeatedly, in both languages and across a restart (the registry is
// durable): the bytes are identical every time.
func TestFilterDeterminism(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "d", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	publishEvents(t, c, "d", 1000, 17)
	for _, lang := range []string{"go", "as"} {
		if _, _, err := c.UploadPlugin(ctx, lang+"-project", guest(t, lang+"/project"), ""); err != nil {
			t.Fatal(err)
		}
	}
	replay := func(c *client.Client, plugin string) map[uint32][]ident {
		return identsOf(readAll(t, c, "d", client.Until(client.End()), client.Filter(plugin, []byte(`{"fields":["type","id"]}`))))
	}
	first := replay(c, "go-project")
	if len(first) != 2 || len(first[0])+len(first[1]) != 1000 {
		t.Fatalf("project delivered %d+%d records, want 1000", len(first[0]), len(first[1]))
	}
	for _, r := range first[0][:3] {
		if !strings.HasPrefix(r.Value, `{"type":"`) || strings.Contains(r.Value, "card") {
			t.Fatalf("projected value %q", r.Value)
		}
	}
	check := func(what string, got map[uint32][]ident) {
		t.Helper()
		if diff := cmp.Diff(first, got); diff != "" {
			t.Fatalf("%s differs (-first +got):\n%s", what, diff)
		}
	}
	check("a second run", replay(c, "go-project"))
	check("the AssemblyScript twin", replay(c, "as-project"))
	s.stop()
	s = startServer(t, dir)
	c = client.New(s.addr)
	check("a run after restart", replay(c, "go-project@1"))
	check("the twin after restart", replay(c, "as-project"))
}
