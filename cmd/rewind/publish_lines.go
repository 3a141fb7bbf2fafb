package main

// Publishing standard input, a record per line. Lines go out in order, one
// request at a time; the first failure stops the run: a line that is not
// valid input, a line too long, a request that fails. Before exiting, a run
// that did not store every line it read says what became of each: the
// lines stored, those certainly not stored, those whose outcome is unknown
// (a request that failed after it may have been stored) and those not
// sent, as ranges of line numbers. Nothing read is dropped without a word.

import (
	"bufio"
	"context"
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
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// lineOptions say how publishLines turns input lines into records.
type lineOptions struct {
	json bool // --input json
	// runID, when set, gives every record without an idempotency key of
	// its own the key runID:LINE (--idempotency-keys line --run-id), so
	// the same input sent again is stored once.
	runID string
	// fromLine is the first line sent (--from-line; 1: all). The lines
	// before it are read and skipped, so line numbers, and the keys made
	// of them, are those of the whole input.
	fromLine int
}

// maxRunIDBytes bounds --run-id: a key is at most 256 bytes, and the line
// number takes up to 20 more.
const maxRunIDBytes = 200

// lineKey is the idempotency key of input line n of run runID.
func lineKey(runID string, n int) string { return runID + ":" + strconv.Itoa(n) }

// message makes the record of input line n, b.
func (o lineOptions) message(base client.Message, b []byte, n int) (client.Message, error) {
	m := base
	if o.json {
		in, err := parseJSONLine(b)
		if err != nil {
			return m, err
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
	if o.runID != "" && m.IdempotencyKey == "" {
		m.IdempotencyKey = lineKey(o.runID, n)
	}
	return m, nil
}

// publishLines publishes r, a record per line, and prints a result per
// line, in order.
//
// A line read while no request is out goes at once, in a request of its
// own; lines read while one is out wait and go together (up to
// maxLineBatch lines and maxBatchBytes) when it comes back, as Kafka's
// producer does without a linger. The server puts each request's keyless
// records in the next partition, so keyless lines spread over the
// partitions whether they are typed or piped (100 piped lines went to one
// partition when the CLI sent them as one request), while a large input
// still goes in large requests.
func publishLines(cmd *cobra.Command, c *client.Client, topic string, base client.Message, opts lineOptions, r io.Reader, out *resultWriter) error {
	ctx := cmd.Context()
	// Requests already out finish after Ctrl-C (within interruptGrace), so
	// an interrupted publish prints the outcome of every line it sent
	// instead of leaving it unknown.
	sendCtx, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSend()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(interruptGrace, cancelSend) })
	defer stopGrace()
	opts.fromLine = max(opts.fromLine, 1)
	q := newLineSender(sendCtx, c, topic, out, opts)
	in := readLines(r)
	defer in.close()
	line := 0 // lines read
	eof, interrupted := false, false
	var inputErr error // the input error that stopped the run
read:
	for {
		select {
		case <-ctx.Done():
			interrupted = true
			break read
		case <-q.failed:
			break read // said at once, not at the next line typed
		case b, ok := <-in.lines:
			if !ok {
				if inputErr = in.err; inputErr == nil {
					eof = true
				}
				break read
			}
			line++
			if line < opts.fromLine {
				continue
			}
			m, err := opts.message(base, b, line)
			if err != nil {
				inputErr = fmt.Errorf("line %d: %w", line, err)
				break read
			}
			if q.add(m) != nil {
				break read // a request failed: q says which
			}
		}
	}
	sendErr := q.wait()
	if interrupted && sendErr == nil {
		fmt.Fprintf(os.Stderr, "interrupted after reading %s: each was sent (its result is above); the rest of the input was not read\n", plural(line, "line"))
		return nil
	}
	if inputErr == nil && sendErr == nil && eof {
		if line < opts.fromLine {
			return fmt.Errorf("--from-line %d: the input has %s, so nothing was sent", opts.fromLine, plural(line, "line"))
		}
		return nil
	}
	q.summary(os.Stderr, line, eof, inputErr)
	if sendErr != nil {
		return sendErr
	}
	return inputErr
}

// interruptGrace bounds how long an interrupted publish waits for the
// requests it already sent.
const interruptGrace = 10 * time.Second

// maxLineBytes bounds an input line: no topic stores a larger record
// (broker.MaxMaxRecordBytes), so a longer line could never be sent.
const maxLineBytes = 16 << 20

// errLineTooLong is the error of a line over maxLineBytes.
var errLineTooLong = fmt.Errorf("longer than %d MiB, the most a line may be (no topic stores a larger record; a topic's own limit, 1 MiB unless it was created with another, may be lower)", maxLineBytes>>20)

// lineReader reads lines on its own goroutine, so that Ctrl-C ends a
// publish that waits for typed input. lines closes at the end of the input
// or at the first error, which err then holds (set before lines closes);
// close stops the goroutine once its blocked read, if any, returns.
type lineReader struct {
	lines <-chan []byte
	err   error
	stop  chan struct{}
}

func readLines(r io.Reader) *lineReader {
	ch := make(chan []byte, 256)
	lr := &lineReader{lines: ch, stop: make(chan struct{})}
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		// Room for a line of maxLineBytes and its "\r\n": a line one
		// byte longer is refused below, a longer one by the scanner.
		sc.Buffer(make([]byte, 64<<10), maxLineBytes+2)
		n := 0
		for sc.Scan() {
			n++
			if len(sc.Bytes()) > maxLineBytes {
				lr.err = fmt.Errorf("line %d: %w", n, errLineTooLong)
				return
			}
			select {
			case ch <- append([]byte(nil), sc.Bytes()...):
			case <-lr.stop:
				return
			}
		}
		switch err := sc.Err(); {
		case errors.Is(err, bufio.ErrTooLong):
			lr.err = fmt.Errorf("line %d: %w", n+1, errLineTooLong)
		case err != nil:
			lr.err = fmt.Errorf("reading line %d: %w", n+1, err)
		}
	}()
	return lr
}

func (lr *lineReader) close() { close(lr.stop) }

// maxLineBatch bounds the lines of one publish request, maxBatchBytes
// their bytes (a request takes at most 64 MiB, api.MaxRequestBytes; a
// batch of 1,000 lines of 100 kB was refused whole). A line alone may
// pass maxBatchBytes.
const (
	maxLineBatch  = 1000
	maxBatchBytes = 16 << 20
)

// lineSender sends lines as they come: one request out at a time, by its
// own goroutine, which prints the results, then sends what queued
// meanwhile. The first failure stops it: nothing queued after a failed
// request is sent. It notes the outcome of every line it sent.
type lineSender struct {
	ctx   context.Context
	c     *client.Client
	topic string
	out   *resultWriter
	first int    // the input line of the first message added
	runID string // --run-id (said in the summary)
	mu    sync.Mutex
	idle  *sync.Cond // signalled when the sender stops
	queue []client.Message
	taken int   // messages taken from the queue so far (the next is line first+taken)
	busy  bool  // a goroutine is sending; Invariant: !busy => queue is empty or err != nil
	err   error // the first failure
	// failed closes when err is set.
	failed chan struct{}
	sent   ledger
}

func newLineSender(ctx context.Context, c *client.Client, topic string, out *resultWriter, opts lineOptions) *lineSender {
	q := &lineSender{ctx: ctx, c: c, topic: topic, out: out, first: opts.fromLine, runID: opts.runID, failed: make(chan struct{})}
	q.idle = sync.NewCond(&q.mu)
	return q
}

// add queues m, sending it at once if no request is out. While a full
// batch waits, it blocks until the request out comes back. It returns the
// first failure, if any, without queueing m.
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

// takeLocked takes the next batch off the queue, with the input line of
// its first message.
func (q *lineSender) takeLocked() ([]client.Message, int) {
	n, size := 0, 0
	for n < len(q.queue) && n < maxLineBatch {
		m := &q.queue[n]
		size += len(m.Key) + len(m.Value) + len(m.IdempotencyKey)
		for _, h := range m.Headers {
			size += len(h.Key) + len(h.Value)
		}
		if n > 0 && size > maxBatchBytes {
			break
		}
		if m.IdempotencyKey == "" {
			q.sent.keyless++
		}
		n++
	}
	batch := slices.Clone(q.queue[:n])
	q.queue = append(q.queue[:0], q.queue[n:]...)
	first := q.first + q.taken
	q.taken += n
	return batch, first
}

func (q *lineSender) send(batch []client.Message, first int) {
	for {
		err := q.publish(batch, first)
		q.mu.Lock()
		if err != nil && q.err == nil {
			q.err = err
			close(q.failed)
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

// publish sends batch, whose first message is input line first, prints
// the outcome and notes it.
func (q *lineSender) publish(batch []client.Message, first int) error {
	last := first + len(batch) - 1
	res, err := q.c.Publish(q.ctx, q.topic, batch...)
	var partial *client.PartialError
	if err == nil || errors.As(err, &partial) {
		werr := q.out.report(res, err, first)
		q.mu.Lock()
		defer q.mu.Unlock()
		failed := map[int]client.FailedMessage{}
		if partial != nil {
			for _, f := range partial.Failed {
				failed[f.Index] = f
			}
		}
		for i := range batch {
			f, ok := failed[i]
			switch {
			case !ok:
				q.sent.note(first+i, first+i, outStored)
			case f.NotStored:
				q.sent.note(first+i, first+i, outNotStored)
			default:
				q.sent.note(first+i, first+i, outUnknown)
			}
		}
		return werr
	}
	// The request failed as a whole: the summary and the error say so.
	what := outUnknown
	if refused(err) {
		what = outNotStored
	}
	if big := tooLarge(err); big != nil && int(big.GetIndex()) < len(batch) {
		err = fmt.Errorf("line %d: %d bytes (key, value, headers and idempotency key), over the topic's limit of %d bytes a record; a request is stored whole or not at all", first+int(big.GetIndex()), big.GetSize(), big.GetMaxRecordBytes())
	}
	q.mu.Lock()
	q.sent.note(first, last, what)
	q.mu.Unlock()
	return err
}

// refused reports whether a publish that failed as a whole with err
// stored none of its records: the server refused the request itself (a
// bad record, no such topic, no right to publish), as it would refuse it
// again. Any other failure (the node went away, no answer in time, an
// internal error) leaves the outcome unknown: the client retries such
// failures, and an earlier attempt may have been stored.
func refused(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodePermissionDenied, connect.CodeUnauthenticated:
		return true
	}
	return false
}

// tooLarge is the RecordTooLarge detail of err, if any.
func tooLarge(err error) *rewindv1.RecordTooLarge {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if big, ok := v.(*rewindv1.RecordTooLarge); ok {
				return big
			}
		}
	}
	return nil
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

// summary says, after a run that did not store everything it read, what
// became of each line: stored, not stored, outcome unknown, not sent
// (read: lines read in all; eof: the whole input was read; inputErr: the
// input error that stopped the run, if any, and said here when the
// command's error is a failed request), and how to send again what was
// not stored. Call it after wait.
func (q *lineSender) summary(w io.Writer, read int, eof bool, inputErr error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	unsent := q.first + q.taken
	rest := "the input was not read further"
	if inputErr != nil && q.err != nil {
		rest = inputErr.Error()
	}
	if q.sent.ranges(outStored) == "" && q.sent.ranges(outUnknown) == "" {
		if eof {
			fmt.Fprintf(w, "nothing was stored (%s)\n", lineRange(q.first, read))
		} else {
			fmt.Fprintf(w, "nothing was stored (lines from %d on; %s)\n", q.first, rest)
		}
		return
	}
	for _, o := range []outcome{outStored, outNotStored, outUnknown} {
		if r := q.sent.ranges(o); r != "" {
			fmt.Fprintf(w, "%s: %s\n", o, r)
		}
	}
	switch {
	case !eof:
		fmt.Fprintf(w, "not sent: lines from %d on (%s)\n", unsent, rest)
	case unsent <= read:
		fmt.Fprintf(w, "not sent: %s\n", lineRange(unsent, read))
	}
	resend := q.sent.firstNot(outStored, unsent)
	again := "the same command on the same input"
	if q.runID != "" {
		again += " (the same --run-id)"
	}
	switch {
	case q.sent.keyless == 0:
		fmt.Fprintf(w, "to send again what was not stored, run %s with --from-line %d: records stored before are answered as duplicates (within the topic's dedupe window), not stored twice\n", again, resend)
	case q.sent.ranges(outUnknown) != "":
		fmt.Fprintf(w, "a line whose outcome is unknown may be stored twice if sent again: check with `rewind replay` which were stored, or publish with --idempotency-keys line --run-id ID, which makes sending again safe (rewind publish --help)\n")
	case q.sent.storedAfter(resend):
		fmt.Fprintf(w, "sending again from line %d would store twice the lines after it that were stored: send the lines not stored alone, or publish with --idempotency-keys line --run-id ID, which makes sending again safe (rewind publish --help)\n", resend)
	default:
		fmt.Fprintf(w, "to send the rest, run %s with --from-line %d\n", again, resend)
	}
}

// outcome is what became of a line that was sent.
type outcome uint8

const (
	outStored    outcome = iota // acknowledged: stored
	outNotStored                // certainly not stored: safe to send again
	outUnknown                  // not acknowledged, may have been stored
)

func (o outcome) String() string {
	switch o {
	case outStored:
		return "stored"
	case outNotStored:
		return "not stored (safe to send again)"
	}
	return "outcome unknown (may have been stored)"
}

// ledger is the outcome of each line sent, as runs of consecutive lines
// in increasing order.
type ledger struct {
	runs    []run
	keyless int // lines sent without an idempotency key
}

type run struct {
	from, to int // input lines, inclusive
	what     outcome
}

// note records that lines from to to (after every line noted before)
// had outcome what.
func (l *ledger) note(from, to int, what outcome) {
	if n := len(l.runs); n > 0 && l.runs[n-1].what == what && l.runs[n-1].to+1 == from {
		l.runs[n-1].to = to
		return
	}
	l.runs = append(l.runs, run{from: from, to: to, what: what})
}

// maxRanges bounds the ranges a summary line lists.
const maxRanges = 10

// ranges lists the lines with outcome what ("" if none): "lines 1-3, 5".
func (l *ledger) ranges(what outcome) string {
	var list []string
	more, lines := 0, 0
	for _, r := range l.runs {
		if r.what != what {
			continue
		}
		lines += r.to - r.from + 1
		if len(list) == maxRanges {
			more++
			continue
		}
		if r.from == r.to {
			list = append(list, strconv.Itoa(r.from))
		} else {
			list = append(list, fmt.Sprintf("%d-%d", r.from, r.to))
		}
	}
	if len(list) == 0 {
		return ""
	}
	s := "line"
	if lines > 1 {
		s = "lines"
	}
	s += " " + strings.Join(list, ", ")
	if more > 0 {
		s += fmt.Sprintf(" and %s (%d lines in all)", plural(more, "more range"), lines)
	}
	return s
}

// firstNot is the first line noted with an outcome other than what, or
// def if there is none.
func (l *ledger) firstNot(what outcome, def int) int {
	for _, r := range l.runs {
		if r.what != what {
			return r.from
		}
	}
	return def
}

// storedAfter reports whether a line after line n was stored.
func (l *ledger) storedAfter(n int) bool {
	for _, r := range l.runs {
		if r.what == outStored && r.to > n {
			return true
		}
	}
	return false
}

// lineRange names lines from to to: "line 5", "lines 5-9".
func lineRange(from, to int) string {
	if from == to {
		return "line " + strconv.Itoa(from)
	}
	return fmt.Sprintf("lines %d-%d", from, to)
}
