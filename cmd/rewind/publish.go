package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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
		idemKeys, runID          string
		fromLine                 int
	)
	cmd := &cobra.Command{
		Use:   "publish TOPIC [VALUE]",
		Short: "Publish records",
		Long: `Publish one record with VALUE, or one record per line of standard input
(a line may be at most 16 MiB).

With --input json each input line is a JSON object with the fields
"key", "value", "headers" (an object of strings), "idempotency_key" and
"partition"; any other field is refused.
Prints where each record was stored: partition, offset, message_id.

Lines go out in order, and the first failure stops the run: a line that is
not valid input or too long, or a request that fails. The requests already
out are waited for; then the command says on standard error which lines
were stored, which were certainly not (safe to send again), which have an
unknown outcome (their request failed after it may have been stored) and
which were not sent, as ranges of line numbers, and exits 1. When some
partitions fail while others store their records, each record not stored
also gets a line: its input line, partition and error, and whether it was
certainly not stored.

To make sending input again safe, give --idempotency-keys line --run-id ID:
line N gets the idempotency key ID:N. After a failure, run the same
command on the same input, with the same ID, and --from-line N where the
report says: records stored before are answered as duplicates (within the
topic's dedupe window, 24 h by default), not stored twice. Without keys, a
line whose outcome is unknown may be stored twice if sent again. Keys cost
throughput (docs/operations.md, "Deduplication").

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
			lines, err := lineFlags(cmd, idem, idemKeys, runID, fromLine, len(args) == 2 || expect != "")
			if err != nil {
				return err
			}
			lines.json = input == "json"
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
			return publishLines(cmd, c, topic, base, lines, os.Stdin, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&key, "key", "", "record key (decides the partition)")
	f.StringVar(&idem, "idempotency-key", "", "idempotency key stored with the record")
	f.StringArrayVar(&headers, "header", nil, "header key=value (repeatable)")
	f.Var(&partition, "partition", "explicit partition (default: by key)")
	f.StringVar(&input, "input", "text", "stdin format: text (one value per line) or json")
	f.StringVar(&idemKeys, "idempotency-keys", "", "line: give each line the idempotency key RUN-ID:LINE (needs --run-id), so sending the input again stores nothing twice")
	f.StringVar(&runID, "run-id", "", "the run of --idempotency-keys line: the same input sent again with the same run id gets the same keys")
	f.IntVar(&fromLine, "from-line", 1, "send the input from this line on (the lines before are read and skipped; line numbers stay those of the whole input)")
	f.StringVar(&expect, "expect-version", "", "store only if the key's last version is N, or none, exists, any (a conditional append)")
	f.StringArrayVar(&tags, "tag", nil, "tag indexed for queries, e.g. course:42 (repeatable)")
	f.StringVar(&typ, "type", "", "record type indexed for queries")
	addFormat(cmd, &format)
	return cmd
}

// lineFlags checks the flags of publishing lines (--idempotency-keys,
// --run-id, --from-line) and returns them as lineOptions; single says a
// single record is published (a VALUE argument), which takes none of them.
func lineFlags(cmd *cobra.Command, idem, idemKeys, runID string, fromLine int, single bool) (lineOptions, error) {
	f := cmd.Flags()
	if single {
		for _, name := range []string{"idempotency-keys", "run-id", "from-line"} {
			if f.Changed(name) {
				return lineOptions{}, fmt.Errorf("--%s is for publishing lines of standard input, not a VALUE argument (give --idempotency-key for one record)", name)
			}
		}
		return lineOptions{}, nil
	}
	switch idemKeys {
	case "":
		if runID != "" {
			return lineOptions{}, errors.New("--run-id is the run of --idempotency-keys line: give both")
		}
	case "line":
		if runID == "" {
			return lineOptions{}, errors.New("--idempotency-keys line needs --run-id ID: the keys are ID:LINE, so the same input sent again with the same ID is stored once (pick an ID for this input, e.g. its file name and date)")
		}
		if len(runID) > maxRunIDBytes {
			return lineOptions{}, fmt.Errorf("--run-id: %d bytes, at most %d", len(runID), maxRunIDBytes)
		}
		if idem != "" {
			return lineOptions{}, errors.New("--idempotency-key gives every line the same key: drop it with --idempotency-keys line")
		}
	default:
		return lineOptions{}, fmt.Errorf("unknown --idempotency-keys %q (line)", idemKeys)
	}
	if fromLine < 1 {
		return lineOptions{}, fmt.Errorf("--from-line %d: lines are numbered from 1", fromLine)
	}
	return lineOptions{runID: runID, fromLine: fromLine}, nil
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
		m := map[string]any{"partition": r.Partition, "offset": r.Offset, "message_id": r.MessageID, "duplicate": r.Duplicate,
			"append_time": r.AppendTime.UTC().Format(time.RFC3339Nano)}
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
