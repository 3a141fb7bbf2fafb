package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
)

func newPublish(g *globals) *cobra.Command {
	var (
		key, idem, input, format string
		expect, typ              string
		headers, tags            []string
		partition                partitionFlag
	)
	cmd := &cobra.Command{
		Use:   "publish TOPIC [VALUE]",
		Short: "Publish records",
		Long: `Publish one record with VALUE, or one record per line of standard input.

With --input json each input line is a JSON object with the fields
"key", "value", "headers" (an object of strings) and "idempotency_key".
Prints where each record was stored: partition, offset, message_id.

When some partitions fail while others store their records, the stored
records are printed as usual, each record not stored gets a line on
standard error (its input line, partition, the error, and whether it was
certainly not stored, so that sending it again cannot duplicate it), and
the command exits 1 without sending the rest of the input.

--expect-version makes the publish conditional (an event store's append):
the record is stored only if the key's last version is N (none: the key
has no record; exists: it has one; any: no check). On a conflict nothing
is stored and the command exits 1, naming the expected and actual
versions. --tag (repeatable) and --type are indexed for queries.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if input != "text" && input != "json" {
				return fmt.Errorf("unknown --input %q (text or json)", input)
			}
			base := client.Message{IdempotencyKey: idem}
			if key != "" {
				base.Key = []byte(key)
			}
			base.Partition = partition.p
			base.Tags, base.Type = tags, typ
			for _, h := range headers {
				k, v, ok := strings.Cut(h, "=")
				if !ok {
					return fmt.Errorf("--header %q: want key=value", h)
				}
				base.Headers = append(base.Headers, client.Header{Key: k, Value: []byte(v)})
			}
			c := g.client()
			topic := args[0]
			out := newResultWriter(format)
			if expect != "" {
				cond, err := parseExpect(expect)
				if err != nil {
					return err
				}
				if key == "" || len(args) != 2 {
					return fmt.Errorf("--expect-version needs --key and a VALUE argument")
				}
				m := base
				m.Value = []byte(args[1])
				res, err := c.Append(cmd.Context(), topic, []byte(key), []client.Message{m}, cond)
				var ce *client.ConditionError
				if errors.As(err, &ce) {
					return fmt.Errorf("conflict, nothing stored: %s", ce.Summary())
				}
				return out.report(res, err, 0)
			}
			if len(args) == 2 {
				m := base
				m.Value = []byte(args[1])
				res, err := c.Publish(cmd.Context(), topic, m)
				return out.report(res, err, 0)
			}
			return publishLines(cmd, c, topic, base, input, os.Stdin, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&key, "key", "", "record key (decides the partition)")
	f.StringVar(&idem, "idempotency-key", "", "idempotency key stored with the record")
	f.StringArrayVar(&headers, "header", nil, "header key=value (repeatable)")
	f.Var(&partition, "partition", "explicit partition (default: by key)")
	f.StringVar(&input, "input", "text", "stdin format: text (one value per line) or json")
	f.StringVar(&expect, "expect-version", "", "store only if the key's last version is N, or none, exists, any (a conditional append)")
	f.StringArrayVar(&tags, "tag", nil, "tag indexed for queries, e.g. course:42 (repeatable)")
	f.StringVar(&typ, "type", "", "record type indexed for queries")
	addFormat(cmd, &format)
	return cmd
}

type jsonInput struct {
	Key            *string        `json:"key"`
	Value          string         `json:"value"`
	Headers        orderedHeaders `json:"headers"`
	IdempotencyKey string         `json:"idempotency_key"`
	Partition      *uint32        `json:"partition"`
}

// orderedHeaders is a JSON object of string headers, kept in the order
// the line wrote them. (A Go map lost it, and a record's payload hash,
// which the idempotency check compares, covers its headers in order: an
// identical republish was refused as a different record about 1 time in
// 5.)
type orderedHeaders []client.Header

// UnmarshalJSON reads an object of strings; null is no headers.
func (h *orderedHeaders) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	t, err := d.Token()
	if err != nil {
		return err
	}
	if t == nil {
		*h = nil
		return nil
	}
	if t != json.Delim('{') {
		return errors.New(`"headers" must be an object of strings`)
	}
	var out orderedHeaders
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return err
		}
		var v string
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf(`header %q: its value must be a string`, k)
		}
		out = append(out, client.Header{Key: k.(string), Value: []byte(v)})
	}
	if _, err := d.Token(); err != nil {
		return err
	}
	*h = out
	return nil
}

// publishLines publishes stdin, a record per line, and prints a result per
// line, in order.
//
// A line read while no request is out goes at once, in a request of its
// own; lines read while one is out wait and go together (up to
// maxLineBatch) when it comes back, as Kafka's producer does without a
// linger. The server puts each request's keyless records in the next
// partition, so keyless lines spread over the partitions whether they are
// typed or piped (100 piped lines went to one partition when the CLI sent
// them as one request), while a large input still goes in large requests.
func publishLines(cmd *cobra.Command, c *client.Client, topic string, base client.Message, input string, r io.Reader, out *resultWriter) error {
	ctx := cmd.Context()
	// Requests already out finish after Ctrl-C (within interruptGrace), so
	// an interrupted publish prints the outcome of every line it sent
	// instead of leaving it unknown.
	sendCtx, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSend()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(interruptGrace, cancelSend) })
	defer stopGrace()
	q := newLineSender(sendCtx, c, topic, out)
	lines, readErr := readLines(r)
	line := 0
	for {
		var b []byte
		var ok bool
		select {
		case <-ctx.Done():
			err := q.wait()
			fmt.Fprintf(os.Stderr, "interrupted after reading %s: each was sent (its result is above); the rest of the input was not read\n", plural(line, "line"))
			return err
		case b, ok = <-lines:
		}
		if !ok {
			break
		}
		line++
		m := base
		if input == "json" {
			var in jsonInput
			if err := json.Unmarshal(b, &in); err != nil {
				q.wait()
				return fmt.Errorf("line %d: %w", line, err)
			}
			m.Value = []byte(in.Value)
			if in.Key != nil {
				m.Key = []byte(*in.Key)
			}
			if in.IdempotencyKey != "" {
				m.IdempotencyKey = in.IdempotencyKey
			}
			if in.Partition != nil {
				m.Partition = in.Partition
			}
			m.Headers = append(append([]client.Header(nil), base.Headers...), in.Headers...)
		} else {
			m.Value = b
		}
		if err := q.add(m); err != nil {
			q.notSent(true)
			return err
		}
	}
	if err := *readErr; err != nil {
		q.wait()
		return err
	}
	err := q.wait()
	if err != nil {
		q.notSent(false)
	}
	return err
}

// interruptGrace bounds how long an interrupted publish waits for the
// requests it already sent.
const interruptGrace = 10 * time.Second

// readLines reads r line by line on its own goroutine, so that Ctrl-C ends
// a publish that waits for typed input. The channel closes at the end of
// the input; the error, if any, is set before it closes.
func readLines(r io.Reader) (<-chan []byte, *error) {
	ch := make(chan []byte, 256)
	var err error
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			ch <- append([]byte(nil), sc.Bytes()...)
		}
		err = sc.Err()
	}()
	return ch, &err
}

// maxLineBatch bounds the lines of one publish request.
const maxLineBatch = 1000

// lineSender sends lines as they come: one request out at a time, by its
// own goroutine, which prints the results, then sends what queued
// meanwhile. The first failure stops it: nothing queued after a failed
// request is sent.
type lineSender struct {
	ctx   context.Context
	c     *client.Client
	topic string
	out   *resultWriter
	mu    sync.Mutex
	idle  *sync.Cond // signalled when the sender stops
	queue []client.Message
	taken int   // lines taken from the queue so far (the next is line taken+1)
	busy  bool  // a goroutine is sending; Invariant: !busy => queue is empty or err != nil
	err   error // the first failure
}

func newLineSender(ctx context.Context, c *client.Client, topic string, out *resultWriter) *lineSender {
	q := &lineSender{ctx: ctx, c: c, topic: topic, out: out}
	q.idle = sync.NewCond(&q.mu)
	return q
}

// add queues m, sending it at once if no request is out. While a full
// batch waits, it blocks until the request out comes back.
func (q *lineSender) add(m client.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.busy && len(q.queue) >= maxLineBatch && q.err == nil {
		q.idle.Wait()
	}
	if q.err != nil {
		return q.err
	}
	q.queue = append(q.queue, m)
	if !q.busy {
		q.busy = true
		go q.send(q.takeLocked())
	}
	return nil
}

// takeLocked takes the next batch off the queue, with the line number of
// its first message.
func (q *lineSender) takeLocked() ([]client.Message, int) {
	n := min(len(q.queue), maxLineBatch)
	batch := slices.Clone(q.queue[:n])
	q.queue = append(q.queue[:0], q.queue[n:]...)
	first := q.taken + 1
	q.taken += n
	return batch, first
}

func (q *lineSender) send(batch []client.Message, first int) {
	for {
		err := q.publish(batch, first)
		q.mu.Lock()
		if err != nil && q.err == nil {
			q.err = err
		}
		if q.err != nil || len(q.queue) == 0 {
			q.busy = false
			q.idle.Broadcast()
			q.mu.Unlock()
			return
		}
		batch, first = q.takeLocked()
		q.idle.Broadcast() // room in the queue
		q.mu.Unlock()
	}
}

// publish sends batch, whose first message is input line first, and
// prints the outcome.
func (q *lineSender) publish(batch []client.Message, first int) error {
	res, err := q.c.Publish(q.ctx, q.topic, batch...)
	return q.out.report(res, err, first)
}

// notSent says, after a failure, from which line on the input was not
// sent (if any was read), so that no line is left without an outcome.
// more says that a line was read and not queued.
func (q *lineSender) notSent(more bool) {
	q.mu.Lock()
	from, queued := q.taken+1, len(q.queue)
	q.mu.Unlock()
	if more || queued > 0 {
		fmt.Fprintf(os.Stderr, "lines from %d on were not sent: publishing stops at the first failure\n", from)
	}
}

// wait sends what is queued, waits until the sender stops, and returns the
// first failure.
func (q *lineSender) wait() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.busy && len(q.queue) > 0 && q.err == nil {
		q.busy = true
		go q.send(q.takeLocked())
	}
	for q.busy {
		q.idle.Wait()
	}
	return q.err
}

type resultWriter struct {
	w    *bufio.Writer
	json bool
}

func newResultWriter(format string) *resultWriter {
	return &resultWriter{w: bufio.NewWriter(os.Stdout), json: format == "json"}
}

// report prints the outcome of a publish: a result per stored record, and
// when some partitions failed (a *client.PartialError), a line on stderr
// per record not stored. first is the input line of the first record (0:
// the record is the VALUE argument). It returns err, or a write error.
func (rw *resultWriter) report(res []client.Result, err error, first int) error {
	var partial *client.PartialError
	if err != nil && !errors.As(err, &partial) {
		return err
	}
	failed := map[int]client.FailedMessage{}
	if partial != nil {
		for _, f := range partial.Failed {
			failed[f.Index] = f
		}
	}
	for i, r := range res {
		f, ok := failed[i]
		if !ok {
			if werr := rw.write(r); werr != nil {
				return werr
			}
			continue
		}
		what := "the record"
		if first > 0 {
			what = "line " + strconv.Itoa(first+i)
		}
		outcome := "it may have been stored (sending it again without an idempotency key may store it twice)"
		if f.NotStored {
			outcome = "it was certainly not stored (safe to send again)"
		}
		fmt.Fprintf(os.Stderr, "%s: not acknowledged (partition %d: %s: %s); %s\n", what, f.Partition, connect.CodeOf(f.Err), connectMessage(f.Err), outcome)
	}
	if ferr := rw.flush(); ferr != nil {
		return ferr
	}
	return err
}

// connectMessage is the message of a Connect error, without its code.
func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

func (rw *resultWriter) write(r client.Result) error {
	if rw.json {
		m := map[string]any{"partition": r.Partition, "offset": r.Offset, "message_id": r.MessageID, "duplicate": r.Duplicate}
		if r.HasKeyVersion {
			m["key_version"] = r.KeyVersion
		}
		b, _ := json.Marshal(m)
		rw.w.Write(b)
		rw.w.WriteByte('\n')
	} else {
		fmt.Fprintf(rw.w, "partition=%d offset=%d message_id=%s", r.Partition, r.Offset, r.MessageID)
		if r.HasKeyVersion {
			fmt.Fprintf(rw.w, " key_version=%d", r.KeyVersion)
		}
		if r.Duplicate {
			// Stored before under the same idempotency key: this is
			// where it is, and nothing new was stored.
			rw.w.WriteString(" duplicate")
		}
		rw.w.WriteByte('\n')
	}
	return rw.w.Flush()
}

func (rw *resultWriter) flush() error { return rw.w.Flush() }

// parseExpect parses --expect-version: N, none, exists or any.
func parseExpect(s string) (client.Condition, error) {
	switch s {
	case "none":
		return client.ExpectNone(), nil
	case "exists":
		return client.ExpectExists(), nil
	case "any":
		return client.ExpectAny(), nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return client.Condition{}, fmt.Errorf("--expect-version %q: want a version (0, 1, ...), none, exists or any", s)
	}
	return client.ExpectVersion(n), nil
}
