package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/sdk/client"
)

func TestPrintableEscapesControlCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"plain":          "plain",
		"a\tb":           `a\tb`,
		"a\nb\r":         `a\nb\r`,
		"bell\a esc\x1b": `bell\x07 esc\x1b`,
		"del\x7f":        `del\x7f`,
		"c1\u0085":       `c1\u0085`,
		"ünïcode ✓":      "ünïcode ✓",
		"back\\slash":    `back\slash`,
		"\xff\xfe":       "base64://4=",
	} {
		if got := printable([]byte(in)); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

func sampleRecord() *client.Record {
	return &client.Record{
		Partition: 2, Offset: 7, MessageID: "AQEB", AppendTime: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		Key: []byte("k\t1"), Value: []byte("v\x00al"),
		Headers: []client.Header{{Key: "h\n", Value: []byte("x\ty")}},
	}
}

// TestTextOutputIsOneLinePerRecord: a tab or control character inside a
// key, value or header cannot split a record's columns or lines.
func TestTextOutputIsOneLinePerRecord(t *testing.T) {
	var buf bytes.Buffer
	w := newRecordWriterTTY(&buf, "text", false)
	if err := w.write(sampleRecord()); err != nil {
		t.Fatal(err)
	}
	w.flush()
	want := "2\t7\t2026-12-01T10:00:00Z\tk\\t1\tv\\x00al\th\\n=x\\ty\n"
	if buf.String() != want {
		t.Errorf("text output %q, want %q", buf.String(), want)
	}
}

// TestTextHeaderOnlyOnATerminal: the column names come first on a
// terminal, never in a pipe (where every line is a record).
func TestTextHeaderOnlyOnATerminal(t *testing.T) {
	for _, tc := range []struct {
		format string
		tty    bool
		header bool
	}{{"text", true, true}, {"text", false, false}, {"json", true, false}, {"{{.Offset}}", true, false}} {
		var buf bytes.Buffer
		w := newRecordWriterTTY(&buf, tc.format, tc.tty)
		w.write(sampleRecord())
		w.write(sampleRecord())
		w.flush()
		if got := strings.Count(buf.String(), "PARTITION\tOFFSET"); got != map[bool]int{true: 1}[tc.header] || (tc.header && !strings.HasPrefix(buf.String(), recordHeader+"\n")) {
			t.Errorf("format %s, terminal %v: %q; want a header line: %v", tc.format, tc.tty, buf.String(), tc.header)
		}
	}
}

// TestJSONOutputKeepsZeroPositions: a record at partition 0, offset 0,
// key version 0 prints those zeros in --format json (a reader of the JSON
// must not find the position missing, as protojson's default would leave
// it); a record without a key has no key_version at all.
func TestJSONOutputKeepsZeroPositions(t *testing.T) {
	var buf bytes.Buffer
	w := newRecordWriterTTY(&buf, "json", false)
	w.write(&client.Record{Key: []byte("k"), Value: []byte("v"), HasKeyVersion: true, AppendTime: time.Unix(0, 0)})
	w.write(&client.Record{Value: []byte("v"), AppendTime: time.Unix(0, 0)})
	w.flush()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("output %q: want 2 lines", buf.String())
	}
	for i, want := range []map[string]any{
		{"partition": 0.0, "offset": 0.0, "key_version": 0.0, "key": "k", "idempotency_key": ""},
		{"partition": 0.0, "offset": 0.0, "key": "", "idempotency_key": ""},
	} {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d %q: %v", i, lines[i], err)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("line %d %s: %q is %v (present %v), want %v", i, lines[i], k, g, ok, v)
			}
		}
		if _, ok := got["key_version"]; ok != (i == 0) {
			t.Errorf("line %d %s: key_version present %v, want %v", i, lines[i], ok, i == 0)
		}
	}
}

func TestFormatTemplate(t *testing.T) {
	var buf bytes.Buffer
	f := "{{.Partition}}/{{.Offset}} {{.Key}}={{.Value}} {{.MessageID}} {{.AppendTime.Unix}}{{range .Headers}} {{.Key}}:{{.Value}}{{end}}"
	if err := checkFormat(f); err != nil {
		t.Fatal(err)
	}
	w := newRecordWriterTTY(&buf, f, true)
	w.write(sampleRecord())
	w.flush()
	if want := "2/7 k\t1=v\x00al AQEB 1796119200 h\n:x\ty\n"; buf.String() != want {
		t.Errorf("template output %q, want %q", buf.String(), want)
	}
	for _, bad := range []string{"{{.Offset", "{{.Nope}}", "{{.Offset.Foo}}", "yaml"} {
		if err := checkFormat(bad); err == nil {
			t.Errorf("checkFormat(%q) = nil, want an error", bad)
		}
	}
	// Commands that do not print records take no template.
	if err := (&formatValue{p: new(string)}).Set("{{.Offset}}"); err == nil || !strings.Contains(err.Error(), "text or json") {
		t.Errorf("a template on a command without records: %v", err)
	}
}

func TestPlural(t *testing.T) {
	if got := plural(1, "record") + ", " + plural(0, "record") + ", " + plural(uint32(3), "partition"); got != "1 record, 0 records, 3 partitions" {
		t.Errorf("plural: %q", got)
	}
}
