package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rewind-io/rewind/sdk/client"
)

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func parseDurationFlag(s string) (time.Duration, error) { return client.ParseDuration(s) }

// recordWriter prints delivered records, one per line.
type recordWriter struct {
	w    *bufio.Writer
	json bool
}

func newRecordWriter(w io.Writer, format string) *recordWriter {
	return &recordWriter{w: bufio.NewWriterSize(w, 256<<10), json: format == "json"}
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
	if rw.json {
		jr := jsonRecord{
			Partition: r.Partition, Offset: r.Offset, MessageID: r.MessageID,
			AppendTime: r.AppendTime.UTC().Format(time.RFC3339Nano), IdempotencyKey: r.IdempotencyKey,
			Headers: []jsonHeader{},
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
	key := "-"
	if len(r.Key) > 0 {
		key = printable(r.Key)
	}
	fmt.Fprintf(rw.w, "%d\t%d\t%s\t%s\t%s", r.Partition, r.Offset, r.AppendTime.UTC().Format(time.RFC3339Nano), key, printable(r.Value))
	for _, h := range r.Headers {
		fmt.Fprintf(rw.w, "\t%s=%s", h.Key, printable(h.Value))
	}
	return rw.w.WriteByte('\n')
}

func printable(b []byte) string {
	if utf8.Valid(b) {
		return strings.ReplaceAll(string(b), "\n", `\n`)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}

func (rw *recordWriter) flush() error { return rw.w.Flush() }

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
