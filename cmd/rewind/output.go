package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
)

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func parseDurationFlag(s string) (time.Duration, error) { return client.ParseDuration(s) }

// recordWriter prints delivered records, one per line: as text (tab
// separated, control characters escaped), as JSON, or through a --format
// template.
type recordWriter struct {
	w      *bufio.Writer
	json   bool
	tmpl   *template.Template // nil: text or JSON
	header bool               // text: print the column names before the first record
}

func newRecordWriter(w io.Writer, format string) *recordWriter {
	f, ok := w.(*os.File)
	return newRecordWriterTTY(w, format, ok && isTerminal(f))
}

// newRecordWriterTTY is newRecordWriter with the terminal test decided by
// the caller: text output to a terminal starts with a header line, output
// to a pipe or file never does (scripts read every line as a record).
func newRecordWriterTTY(w io.Writer, format string, tty bool) *recordWriter {
	rw := &recordWriter{w: bufio.NewWriterSize(w, 256<<10), json: format == "json", header: tty && format == "text"}
	if format != "text" && format != "json" {
		// checkFormat or the flag already refused a bad template.
		rw.tmpl, _ = parseRecordTemplate(format)
	}
	return rw
}

// recordHeader names the columns of text output.
const recordHeader = "PARTITION\tOFFSET\tAPPEND TIME\tKEY\tVALUE\tHEADERS"

// RecordView is what a --format template sees of one record: Key, Value
// and header values as strings of their bytes, unescaped.
type RecordView struct {
	Partition      uint32
	Offset         uint64
	MessageID      string
	AppendTime     time.Time
	Key            string
	Value          string
	Headers        []HeaderView
	IdempotencyKey string
}

// HeaderView is one header of a RecordView.
type HeaderView struct{ Key, Value string }

func recordView(r *client.Record) RecordView {
	v := RecordView{
		Partition: r.Partition, Offset: r.Offset, MessageID: r.MessageID, AppendTime: r.AppendTime.UTC(),
		Key: string(r.Key), Value: string(r.Value), IdempotencyKey: r.IdempotencyKey,
	}
	for _, h := range r.Headers {
		v.Headers = append(v.Headers, HeaderView{Key: h.Key, Value: string(h.Value)})
	}
	return v
}

// parseRecordTemplate compiles a --format template and runs it once over
// a sample record, so that an unknown field fails before anything
// connects.
func parseRecordTemplate(s string) (*template.Template, error) {
	t, err := template.New("format").Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, err
	}
	sample := RecordView{Key: "k", Value: "v", Headers: []HeaderView{{Key: "h", Value: "v"}}, AppendTime: time.Unix(0, 0).UTC()}
	if err := t.Execute(io.Discard, sample); err != nil {
		return nil, fmt.Errorf("%w (fields: .Partition .Offset .MessageID .AppendTime .Key .Value .Headers .IdempotencyKey)", err)
	}
	return t, nil
}

// formatValue is a --format flag: text or json, and on the commands that
// print records also a template. Bad values fail when the flags are
// parsed, before the command connects.
type formatValue struct {
	p         *string
	templates bool
}

func (f *formatValue) String() string { return *f.p }
func (f *formatValue) Type() string   { return "format" }

func (f *formatValue) Set(s string) error {
	if err := f.check(s); err != nil {
		return err
	}
	*f.p = s
	return nil
}

func (f *formatValue) check(s string) error {
	switch {
	case s == "text" || s == "json":
		return nil
	case f.templates && strings.Contains(s, "{{"):
		_, err := parseRecordTemplate(s)
		return err
	case f.templates:
		return fmt.Errorf("unknown format %q (text, json or a template such as '{{.Offset}} {{.Value}}')", s)
	}
	return fmt.Errorf("unknown format %q (text or json)", s)
}

// enableTemplates lets the --format of the named commands under root take
// a template as well (the commands that print records).
func enableTemplates(root *cobra.Command, names ...string) {
	for _, c := range root.Commands() {
		if !slices.Contains(names, c.Name()) {
			continue
		}
		if fl := c.Flags().Lookup("format"); fl != nil {
			if fv, ok := fl.Value.(*formatValue); ok {
				fv.templates = true
				fl.Usage = "output format: text, json, or a Go template over each record, e.g. '{{.Offset}} {{.Key}} {{.Value}}' (fields .Partition .Offset .MessageID .AppendTime .Key .Value .Headers .IdempotencyKey)"
			}
		}
	}
}

// jsonRecord is the JSON shape of a record: exactly these keys, with
// value_base64 (and key_base64) in place of value (key) when the bytes are
// not valid UTF-8.
type jsonRecord struct {
	Partition      uint32       `json:"partition"`
	Offset         uint64       `json:"offset"`
	MessageID      string       `json:"message_id"`
	AppendTime     string       `json:"append_time"`
	Key            *string      `json:"key,omitempty"`
	KeyBase64      *string      `json:"key_base64,omitempty"`
	Value          *string      `json:"value,omitempty"`
	ValueBase64    *string      `json:"value_base64,omitempty"`
	Headers        []jsonHeader `json:"headers"`
	IdempotencyKey string       `json:"idempotency_key"`
	// KeyVersion: the record's position in its key's history, when it has
	// a key.
	KeyVersion *uint64 `json:"key_version,omitempty"`
}

type jsonHeader struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

func textOrBase64(b []byte) (text, b64 *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

func (rw *recordWriter) write(r *client.Record) error {
	if rw.tmpl != nil {
		var b strings.Builder
		if err := rw.tmpl.Execute(&b, recordView(r)); err != nil {
			return fmt.Errorf("--format: %w", err)
		}
		rw.w.WriteString(b.String())
		if !strings.HasSuffix(b.String(), "\n") {
			return rw.w.WriteByte('\n')
		}
		return nil
	}
	if rw.json {
		jr := jsonRecord{
			Partition: r.Partition, Offset: r.Offset, MessageID: r.MessageID,
			AppendTime: r.AppendTime.UTC().Format(time.RFC3339Nano), IdempotencyKey: r.IdempotencyKey,
			Headers: []jsonHeader{},
		}
		if r.HasKeyVersion {
			v := r.KeyVersion
			jr.KeyVersion = &v
		}
		jr.Value, jr.ValueBase64 = textOrBase64(r.Value)
		if jr.Value == nil && jr.ValueBase64 == nil {
			empty := ""
			jr.Value = &empty
		}
		if r.Key != nil {
			jr.Key, jr.KeyBase64 = textOrBase64(r.Key)
		} else {
			empty := ""
			jr.Key = &empty
		}
		for _, h := range r.Headers {
			jh := jsonHeader{Key: h.Key}
			jh.Value, jh.ValueBase64 = textOrBase64(h.Value)
			jr.Headers = append(jr.Headers, jh)
		}
		b, err := json.Marshal(jr)
		if err != nil {
			return err
		}
		rw.w.Write(b)
		return rw.w.WriteByte('\n')
	}
	// Text: partition, offset, append time, key, value (non-UTF-8 as base64).
	if rw.header {
		rw.header = false
		rw.w.WriteString(recordHeader + "\n")
	}
	key := "-"
	if len(r.Key) > 0 {
		key = printable(r.Key)
	}
	fmt.Fprintf(rw.w, "%d\t%d\t%s\t%s\t%s", r.Partition, r.Offset, r.AppendTime.UTC().Format(time.RFC3339Nano), key, printable(r.Value))
	for _, h := range r.Headers {
		fmt.Fprintf(rw.w, "\t%s=%s", printable([]byte(h.Key)), printable(h.Value))
	}
	return rw.w.WriteByte('\n')
}

// printable renders bytes on one line of tab-separated text: UTF-8 with
// control characters escaped (\t, \n, \r as such, others as \xHH or
// \u00HH), anything else as base64: with its prefix. A backslash is left
// as it is; --format json is the lossless form.
func printable(b []byte) string {
	if !utf8.Valid(b) {
		return "base64:" + base64.StdEncoding.EncodeToString(b)
	}
	s := string(b)
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var sb strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&sb, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func (rw *recordWriter) flush() error { return rw.w.Flush() }

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
