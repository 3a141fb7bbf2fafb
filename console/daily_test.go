package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Paris for the date-time picker, whatever the host has

	"connectrpc.com/connect"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// TestConsoleDailyTasks drives the daily tasks in headless Chromium against
// a real `rewind serve --auth` (the console with the bootstrap token typed
// in its header), checking each against the server with the Go client:
// topic create (with "1 partition", not "1 partitions"), produce (the
// record then listed, an idempotency key honoured), hex and base64 of a
// value that is not UTF-8, the server-side search over key, value and
// headers, alter (partitions grown, retention replaced), delete after a
// confirmation, paging past 100 topics, the group list's state and lag and
// a group's delete, the Users, ACLs and Quotas pages, the date-time picker
// in a time zone that is not UTC, a 390 px wide viewport, and dark mode.
func TestConsoleDailyTasks(t *testing.T) {
	chromium := needChromium(t)
	bin, _ := builds(t)
	ctx := testContext(t)
	dir := t.TempDir()
	base := startServer(t, enginetest.ProcessConfig{Bin: bin, Dir: dir, Args: []string{"--auth"}})
	tok, err := os.ReadFile(filepath.Join(dir, "bootstrap-token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	c := client.New(base, client.WithToken(token))

	tab := newBrowser(t, ctx, chromium)
	tab.open(base, "topics")
	tab.run("type the token", tab.set(map[string]string{"#token": token}),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("token").dispatchEvent(new Event("change"))`))
	tab.waitFor("the topic list with the token", `document.querySelector("#topic-list").innerText.includes("No topics yet")`)

	// cells reads a table's body as text.
	cells := func(b *browser, sel string) [][]string {
		b.t.Helper()
		var out [][]string
		b.eval(fmt.Sprintf(`[...document.querySelectorAll(%q)].map((tr) => [...tr.children].map((td) => td.textContent))`, sel+" tbody tr"), &out)
		return out
	}
	text := func(b *browser, sel string) string {
		b.t.Helper()
		var s string
		b.eval(fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ""`, sel), &s)
		return s
	}
	// confirm clicks the button id, checks that only then its
	// confirmation shows, runs asked (if any), and confirms.
	confirm := func(b *browser, id string, asked ...func()) {
		b.t.Helper()
		var shown bool
		b.eval(fmt.Sprintf(`document.querySelector("#%s-confirm").checkVisibility()`, id), &shown)
		if shown {
			b.t.Fatalf("the confirmation of %s shows before it is asked for", id)
		}
		b.run("ask "+id, chromedp.Click(chromedp.CSS("#"+id)))
		b.waitFor("the confirmation", fmt.Sprintf(`document.querySelector("#%s-confirm").checkVisibility()`, id))
		for _, f := range asked {
			f()
		}
		b.run("confirm "+id, chromedp.Click(chromedp.CSS("#"+id+"-confirm")))
	}

	t.Run("create a topic", func(t *testing.T) {
		b := tab.on(t)
		b.open(base, "topics?create=1")
		b.run("fill the form", b.set(map[string]string{"#create-name": "payments", "#create-partitions": "1", "#create-max-age": "7d", "#create-cleanup": "delete"}),
			chromedp.Evaluate[chromedp.Void](`document.querySelector("#create-key-index").checked = false; undefined`),
			chromedp.Click(chromedp.CSS("#create")))
		b.waitFor("the creation", `document.querySelector("#create-result").dataset.topic === "payments"`)
		topic, parts, err := c.DescribeTopic(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		if topic.Partitions != 1 || len(parts) != 1 || topic.RetentionAge != 7*24*time.Hour || topic.KeyIndex {
			t.Fatalf("the console created %+v", topic)
		}
		if got := text(b, "#create-result"); !strings.HasPrefix(got, "Created payments: 1 partition (no key index) · replication 1 · retention: max age 7d · cleanup: delete") {
			t.Errorf("the creation says %q", got)
		}
		b.waitFor("payments in the list", `document.querySelector('section[data-topic="payments"] p.config') !== null`)
		if got := text(b, `section[data-topic="payments"] p.config`); !strings.HasPrefix(got, "1 partition ") || strings.Contains(got, "1 partitions") {
			t.Errorf("the list says %q, want 1 partition", got)
		}
	})

	t.Run("produce", func(t *testing.T) {
		b := tab.on(t)
		b.open(base, "topic?name=payments")
		b.waitFor("the records read", `document.querySelector("#records-status").dataset.state === "done"`)
		if got := text(b, "#topic-config"); !strings.HasPrefix(got, "1 partition ") {
			t.Errorf("the topic page says %q, want 1 partition", got)
		}
		for range 2 { // the second is the same request again: stored once
			b.run("produce", b.set(map[string]string{"#produce-key": "order-1", "#produce-value": `{"total":12}`,
				"#produce-headers": "source: console\ntrace: t-1", "#produce-idempotency": "idem-1", "#produce-partition": ""}),
				chromedp.Evaluate[chromedp.Void](`document.querySelector("#produce-result").dataset.offset = ""; undefined`),
				chromedp.Click(chromedp.CSS("#produce-send")))
			b.waitFor("the record stored", `document.querySelector("#produce-result").dataset.offset === "0"`)
		}
		if got := text(b, "#produce-result"); !strings.HasPrefix(got, "Already stored (same idempotency key) in partition 0 at offset 0 (message ID ") {
			t.Errorf("producing again says %q", got)
		}
		b.waitFor("the record in the list", `[...document.querySelectorAll("#records .key")].some((s) => s.textContent === "order-1")`)
		var rows []row
		b.eval(rowsJS, &rows)
		recs := readAll(t, c, "payments")
		if len(recs) != 1 || string(recs[0].Key) != "order-1" || recs[0].IdempotencyKey != "idem-1" || len(recs[0].Headers) != 2 {
			t.Fatalf("the server holds %+v, want one record order-1 with idempotency key idem-1 and two headers", recs)
		}
		want := []row{{Partition: 0, Offset: 0, Key: "order-1", Value: `{"total":12}`, Headers: "source=console trace=t-1",
			ID: recs[0].MessageID, Time: recs[0].AppendTime.UTC().Format("2006-01-02T15:04:05.000Z")}}
		if !slices.Equal(rows, want) {
			t.Fatalf("the topic's records show\n%+v\nwant\n%+v", rows, want)
		}
		b.screenshot("topic-produce")
	})

	t.Run("binary values", func(t *testing.T) {
		b := tab.on(t)
		if _, err := c.Publish(ctx, "payments", client.Message{Key: []byte("bin"), Value: []byte{0x00, 0xff, 0x10, 'a'}}); err != nil {
			t.Fatal(err)
		}
		b.open(base, "topic?name=payments")
		b.waitFor("the binary record", `[...document.querySelectorAll("#records .key")].some((s) => s.textContent === "bin")`)
		if got := text(b, `#records .rec[data-offset="1"] .value`); got != "hex 00 ff 10 61" {
			t.Errorf("the row shows the value as %q", got)
		}
		b.run("select it", chromedp.Click(chromedp.CSS(`#records .rec[data-offset="1"]`)))
		b.waitFor("its detail", `document.querySelector("#detail-value-hex") !== null`)
		if hex, b64 := text(b, "#detail-value-hex"), text(b, "#detail-value-base64"); hex != "00 ff 10 61" || b64 != "AP8QYQ==" {
			t.Errorf("the detail shows hex %q and base64 %q, want 00 ff 10 61 and AP8QYQ==", hex, b64)
		}
		if got := text(b, "#detail-binary"); !strings.Contains(got, "not UTF-8 (4 bytes)") {
			t.Errorf("the detail says %q", got)
		}
		b.screenshot("topic-binary")
	})

	t.Run("search", func(t *testing.T) {
		b := tab.on(t)
		res, err := c.Publish(ctx, "payments",
			client.Message{Key: []byte("s-1"), Value: []byte("alpha needle")},
			client.Message{Key: []byte("s-2"), Value: []byte("beta")},
			client.Message{Key: []byte("s-3"), Value: []byte("gamma"), Headers: []client.Header{{Key: "tag", Value: []byte("a-needle-h")}}},
			client.Message{Key: []byte("needle-k"), Value: []byte("delta")},
			client.Message{Key: []byte("s-5"), Value: []byte("Needle, capitalised")},
		)
		if err != nil {
			t.Fatal(err)
		}
		b.open(base, "topic?name=payments")
		b.waitFor("the records read", `document.querySelector("#records-status").dataset.state === "done"`)
		b.run("search", b.set(map[string]string{"#records-search": "needle"}),
			chromedp.Evaluate[chromedp.Void](`document.querySelector("#records-status").dataset.state = ""; undefined`),
			chromedp.Click(chromedp.CSS("#records-go")))
		b.waitFor("the search", `document.querySelector("#records-status").dataset.state === "done"`)
		var got []row
		b.eval(rowsJS, &got)
		var want []row
		for _, i := range []int{0, 2, 3} {
			r := res[i]
			key := []string{"s-1", "s-2", "s-3", "needle-k"}[i]
			value := []string{"alpha needle", "beta", "gamma", "delta"}[i]
			headers := []string{"", "", "tag=a-needle-h", ""}[i]
			want = append(want, row{Partition: int(r.Partition), Offset: int(r.Offset), Key: key, Value: value, Headers: headers,
				ID: r.MessageID, Time: r.AppendTime.UTC().Format("2006-01-02T15:04:05.000Z")})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("the search for needle shows\n%+v\nwant\n%+v", got, want)
		}
		if s := text(b, "#records-status"); !strings.HasPrefix(s, `3 records contain "needle"`) {
			t.Errorf("the search says %q", s)
		}
		b.screenshot("topic-search")
	})

	t.Run("alter", func(t *testing.T) {
		b := tab.on(t)
		b.open(base, "topic?name=payments")
		b.waitFor("the alter form filled", `document.querySelector("#alter-partitions").value === "1" && document.querySelector("#alter-max-age").value === "168h0m0s"`)
		b.run("alter", b.set(map[string]string{"#alter-partitions": "3", "#alter-max-age": "", "#alter-max-bytes": "", "#alter-max-records": "1000"}),
			chromedp.Click(chromedp.CSS("#alter-apply")))
		b.waitFor("the change", `document.querySelector("#alter-result").textContent.startsWith("Altered")`)
		topic, parts, err := c.DescribeTopic(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		if topic.Partitions != 3 || len(parts) != 3 || topic.RetentionAge != 0 || topic.RetentionRecords != 1000 || topic.RetentionBytes != 0 {
			t.Fatalf("after the alter the topic is %+v with %d partitions", topic, len(parts))
		}
		b.waitFor("three partitions shown", `document.querySelectorAll("#topic-partitions tbody tr").length === 3`)
		if got := text(b, "#topic-config"); !strings.HasPrefix(got, "3 partitions (no key index) · replication 1 · retention: max 1000 records · ") {
			t.Errorf("the topic page says %q", got)
		}
		b.screenshot("topic")
	})

	t.Run("delete a topic", func(t *testing.T) {
		b := tab.on(t)
		if _, err := c.CreateTopic(ctx, "doomed", client.WithPartitions(1)); err != nil {
			t.Fatal(err)
		}
		b.open(base, "topic?name=doomed")
		b.waitFor("the page", `document.querySelector("#topic-config").textContent.startsWith("1 partition ")`)
		confirm(b, "delete-topic", func() {
			if _, _, err := c.DescribeTopic(ctx, "doomed"); err != nil {
				t.Fatalf("before the confirmation the topic is gone: %v", err)
			}
		})
		b.waitFor("the topic list", `document.body.dataset.page === "topics"`)
		if _, _, err := c.DescribeTopic(ctx, "doomed"); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("after the confirmation DescribeTopic says %v, want NotFound", err)
		}
	})

	t.Run("paging past 100 topics", func(t *testing.T) {
		b := tab.on(t)
		for i := range 120 {
			if _, err := c.CreateTopic(ctx, fmt.Sprintf("bulk-%03d", i), client.WithPartitions(1)); err != nil {
				t.Fatal(err)
			}
		}
		all, err := c.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, tp := range all {
			want = append(want, tp.Name)
		}
		slices.Sort(want)
		b.open(base, "topics")
		var seen []string
		for page := 1; ; page++ {
			b.waitFor(fmt.Sprintf("page %d", page), fmt.Sprintf(`document.querySelector("#page-info").dataset.page === "%d"`, page))
			var names []string
			b.eval(`[...document.querySelectorAll("section.topic")].map((s) => s.dataset.topic)`, &names)
			if len(names) == 0 || len(names) > 25 || page == 1 && len(names) != 25 {
				t.Fatalf("page %d shows %d topics", page, len(names))
			}
			seen = append(seen, names...)
			var last bool
			b.eval(`document.querySelector("#next").disabled`, &last)
			if last {
				break
			}
			b.run("next page", chromedp.Click(chromedp.CSS("#next")))
		}
		if !slices.Equal(seen, want) {
			t.Fatalf("the pages show %d topics\n%q\nwant %d\n%q", len(seen), seen, len(want), want)
		}
		if got, w := text(b, "#page-info"), fmt.Sprintf("%d topics: 101–%d shown (page 5 of 5)", len(want), len(want)); got != w {
			t.Errorf("the last page says %q, want %q", got, w)
		}
	})

	t.Run("groups", func(t *testing.T) {
		b := tab.on(t)
		if _, err := c.ResetGroup(ctx, "audit", "payments", client.Earliest(), nil, false, client.CreateGroup()); err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		member, err := c.Subscribe(mctx, "payments", client.Group("live"), client.ClientName("worker"))
		if err != nil {
			t.Fatal(err)
		}
		defer member.Close()
		_, parts, err := c.DescribeTopic(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		var total uint64
		for _, p := range parts {
			total += p.EndOffset - p.LogStartOffset
		}
		b.open(base, "groups")
		b.waitFor("both groups, live with its member", `(() => {
			const rows = [...document.querySelectorAll("table.groups tbody tr")];
			return rows.length === 2 && rows.some((tr) => tr.dataset.group === "live" && tr.children[4].textContent === "1");
		})()`)
		got := cells(b, "table.groups")
		wantAudit := []string{"audit", "payments", "empty", fmt.Sprint(total), "0"}
		if len(got) != 2 || !slices.Equal(got[0][:5], wantAudit) || !slices.Equal(got[1][:3], []string{"live", "payments", "active"}) || got[1][4] != "1" {
			t.Fatalf("the group list shows %q; want %q first, then live, payments, active with 1 member", got, wantAudit)
		}
		b.screenshot("groups-list")
		confirm(b, "delete-group-0")
		b.waitFor("audit gone", `document.querySelectorAll("table.groups tbody tr").length === 1`)
		gs, err := c.ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(gs) != 1 || gs[0].Group != "live" {
			t.Fatalf("after the delete the server has the groups %+v, want live only", gs)
		}
	})

	t.Run("users", func(t *testing.T) {
		b := tab.on(t)
		b.open(base, "users")
		b.run("create a user", b.set(map[string]string{"#user-name": "billing", "#user-expires": "30d"}), chromedp.Click(chromedp.CSS("#user-create")))
		b.waitFor("the token", `(document.querySelector("#user-token")?.value ?? "") !== ""`)
		var secret string
		b.eval(`document.querySelector("#user-token").value`, &secret)
		users, err := c.ListUsers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var billing *client.User
		for _, u := range users {
			if u.GetPrincipal() == "billing" {
				billing = u
			}
		}
		if billing == nil || billing.GetExpireTime() == nil {
			t.Fatalf("the server has the users %v, want billing with an expiry", users)
		}
		// The token shown works: the server knows who it is (no ACL yet: denied, not unauthenticated).
		if _, err := client.New(base, client.WithToken(secret)).ListTopics(ctx); connect.CodeOf(err) == connect.CodeUnauthenticated {
			t.Fatalf("the token the console showed is refused: %v", err)
		}
		b.waitFor("billing listed", fmt.Sprintf(`document.querySelector('table.users tr[data-token="%s"]') !== null`, billing.GetTokenId()))
		var shown []string
		b.eval(fmt.Sprintf(`[...document.querySelector('table.users tr[data-token="%s"]').children].slice(0, 2).map((td) => td.textContent)`, billing.GetTokenId()), &shown)
		if !slices.Equal(shown, []string{"billing", billing.GetTokenId()}) {
			t.Errorf("the row of billing shows %q", shown)
		}
		b.screenshot("users")
		confirm(b, "revoke-"+billing.GetTokenId())
		b.waitFor("billing revoked", fmt.Sprintf(`document.querySelector('table.users tr[data-token="%s"]') === null`, billing.GetTokenId()))
		users, err = c.ListUsers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			if u.GetPrincipal() == "billing" {
				t.Fatalf("billing's token is still there after Revoke: %v", u)
			}
		}
	})

	t.Run("ACLs", func(t *testing.T) {
		b := tab.on(t)
		b.open(base, "acls")
		b.run("grant", b.set(map[string]string{"#acl-principal": "billing", "#acl-kind": "topic", "#acl-pattern": "payments", "#acl-operations": "read, describe"}),
			chromedp.Click(chromedp.CSS("#acl-grant")))
		b.waitFor("the grant", `document.querySelector("#acl-result").textContent.startsWith("Granted rule ")`)
		rules, _, err := c.ListACLs(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		if len(rules) != 1 || rules[0].GetKind() != "topic" || rules[0].GetPattern() != "payments" || !slices.Equal(rules[0].GetOperations(), []string{"describe", "read"}) || rules[0].GetDeny() {
			t.Fatalf("the server has the rules %v", rules)
		}
		id := rules[0].GetId()
		b.waitFor("the rule listed", fmt.Sprintf(`document.querySelector('table.acls tr[data-id="%d"]') !== null`, id))
		var shown []string
		b.eval(fmt.Sprintf(`[...document.querySelector('table.acls tr[data-id="%d"]').children].slice(0, 6).map((td) => td.textContent)`, id), &shown)
		if w := []string{fmt.Sprint(id), "billing", "topic", "payments", "describe, read", "allow"}; !slices.Equal(shown, w) {
			t.Errorf("the rule shows %q, want %q", shown, w)
		}
		b.screenshot("acls")
		confirm(b, fmt.Sprintf("revoke-acl-%d", id))
		b.waitFor("the rule revoked", fmt.Sprintf(`document.querySelector('table.acls tr[data-id="%d"]') === null`, id))
		if rules, _, err := c.ListACLs(ctx, "billing"); err != nil || len(rules) != 0 {
			t.Fatalf("after Revoke the server has %v (%v)", rules, err)
		}
	})

	t.Run("quotas", func(t *testing.T) {
		b := tab.on(t)
		b.open(base, "quotas")
		b.run("set", b.set(map[string]string{"#quota-principal": "billing", "#quota-publishBytesPerSec": "1000", "#quota-streams": "3", "#quota-topics": ""}),
			chromedp.Click(chromedp.CSS("#quota-set")))
		b.waitFor("the quota set", `document.querySelector("#quota-result").textContent === "Set the quota of billing."`)
		qs, err := c.ListQuotas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		q := qs.GetQuotas()["billing"]
		if q.GetPublishBytesPerSec() != 1000 || q.GetStreams() != 3 || q.GetReplayBytesPerSec() != 0 || q.GetTopics() != 0 {
			t.Fatalf("the server has billing's quota %v", q)
		}
		b.waitFor("the quota listed", `document.querySelector('table.quotas tr[data-principal="billing"]') !== null`)
		var shown []string
		b.eval(`[...document.querySelector('table.quotas tr[data-principal="billing"]').children].slice(0, 7).map((td) => td.textContent)`, &shown)
		if w := []string{"billing", "1000", "no limit", "3", "no limit", "no limit", "no limit"}; !slices.Equal(shown, w) {
			t.Errorf("billing's quota shows %q, want %q", shown, w)
		}
		b.screenshot("quotas")
		confirm(b, "remove-quota-billing")
		b.waitFor("the quota removed", `document.querySelector('table.quotas tr[data-principal="billing"]') === null`)
		if qs, err := c.ListQuotas(ctx); err != nil || qs.GetQuotas()["billing"] != nil {
			t.Fatalf("after Remove the server has %v (%v)", qs.GetQuotas(), err)
		}
	})

	t.Run("date-time picker", func(t *testing.T) {
		b := tab.on(t)
		paris, err := time.LoadLocation("Europe/Paris")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Call(b.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Paris"}); err != nil {
			t.Fatal(err)
		}
		defer chromedp.Call(b.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{}) //nolint:errcheck
		if _, err := c.CreateTopic(ctx, "timed", client.WithPartitions(1)); err != nil {
			t.Fatal(err)
		}
		first, err := c.Publish(ctx, "timed", client.Message{Value: []byte("before")})
		if err != nil {
			t.Fatal(err)
		}
		from := first[0].AppendTime.Add(time.Millisecond).Truncate(time.Millisecond)
		for !time.Now().After(from) {
			time.Sleep(time.Millisecond) // until the next record is appended after from
		}
		second, err := c.Publish(ctx, "timed", client.Message{Value: []byte("after")})
		if err != nil {
			t.Fatal(err)
		}
		// The picker's value as Chromium writes it (HTML's shortest form):
		// no trailing zeros in the fraction, seconds only when not zero.
		local := strings.TrimRight(strings.TrimRight(from.In(paris).Format("2006-01-02T15:04:05.000"), "0"), ".")
		if from.Second() == 0 && from.Nanosecond() == 0 {
			local = strings.TrimSuffix(local, ":00")
		}
		shownLocal := from.In(paris).Format("2006-01-02 15:04:05.000")
		b.open(base, "replay")
		b.run("pick the time", b.set(map[string]string{"#topic": "timed", "#to": "end", "#from-time": local}))
		var fromField string
		b.eval(`document.querySelector("#from").value`, &fromField)
		if w := "@" + from.UTC().Format("2006-01-02T15:04:05.000Z"); fromField != w {
			t.Fatalf("the local time %s (Paris) set From to %q, want %q", local, fromField, w)
		}
		if got, w := text(b, "#from-time-shown"), "local "+shownLocal+" (Europe/Paris, UTC+"; !strings.HasPrefix(got, w) {
			t.Errorf("the picker shows %q, want it to start %q", got, w)
		}
		b.run("replay", chromedp.Click(chromedp.CSS("#start")))
		b.waitFor("the replay", `document.querySelector("#status").dataset.state === "done"`)
		var rows []row
		b.eval(rowsJS, &rows)
		if len(rows) != 1 || rows[0].Value != "after" || rows[0].Offset != int(second[0].Offset) {
			t.Fatalf("the replay from %s shows %+v, want the record after only", local, rows)
		}
		b.screenshot("replay-datetime")
	})

	t.Run("390 px wide", func(t *testing.T) {
		b := tab.on(t)
		if _, err := chromedp.Call(b.ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 390, Height: 844, DeviceScaleFactor: 1, Mobile: true}); err != nil {
			t.Fatal(err)
		}
		defer chromedp.Call(b.ctx, emulation.ClearDeviceMetricsOverride, cdp.Empty{}) //nolint:errcheck
		for _, page := range []string{"replay", "search", "topics", "topic?name=payments", "groups", "plugins", "cluster", "users", "acls", "quotas"} {
			b.open(base, page)
			b.waitFor("the page loaded", `!document.querySelector("main").innerText.includes("loading…")`)
			var m struct{ Inner, Doc, Body int }
			b.eval(`({inner: window.innerWidth, doc: document.documentElement.scrollWidth, body: document.body.scrollWidth})`, &m)
			if m.Inner != 390 || m.Doc > m.Inner || m.Body > m.Inner {
				t.Errorf("%s at 390 px: the window is %d px wide, the page %d (body %d): it scrolls sideways", page, m.Inner, m.Doc, m.Body)
			}
			if page == "topic?name=payments" {
				b.screenshot("narrow")
			}
		}
		// The nav is reachable: a click on its last link (scrolled to it) opens that page.
		b.open(base, "replay")
		b.run("open Quotas from the nav", chromedp.Click(chromedp.CSS(`nav a[data-page="quotas"]`)))
		b.waitFor("the Quotas page", `document.body.dataset.page === "quotas"`)
	})

	t.Run("dark mode", func(t *testing.T) {
		b := tab.on(t)
		colors := func(scheme string) [2]string {
			if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
				t.Fatal(err)
			}
			b.open(base, "topics")
			var c [2]string
			b.eval(`[getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color]`, &c)
			return c
		}
		if got := colors("dark"); got != [2]string{"rgb(13, 17, 23)", "rgb(230, 237, 243)"} {
			t.Errorf("dark: the body is %q on %q, want rgb(230, 237, 243) on rgb(13, 17, 23)", got[1], got[0])
		}
		b.open(base, "topic?name=payments")
		b.waitFor("the records read", `document.querySelector("#records-status").dataset.state === "done"`)
		b.screenshot("dark")
		if got := colors("light"); got != [2]string{"rgb(255, 255, 255)", "rgb(29, 35, 41)"} {
			t.Errorf("light: the body is %q on %q, want rgb(29, 35, 41) on rgb(255, 255, 255)", got[1], got[0])
		}
		if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
			t.Fatal(err)
		}
	})

	// The refused calls before the token (401) are expected; nothing else.
	for _, e := range tab.pageErrors() {
		if !strings.Contains(e, "status of 401") {
			t.Errorf("page error: %v", e)
		}
	}
}

// readAll reads every record of topic with the Go client.
func readAll(t *testing.T, c *client.Client, topic string) []client.Record {
	t.Helper()
	sub, err := c.Subscribe(t.Context(), topic, client.From(client.Earliest()), client.Until(client.End()))
	if err != nil {
		t.Fatal(err)
	}
	var out []client.Record
	for r, err := range sub.Records() {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}
