package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
)

func newPublish(g *globals) *cobra.Command {
	var (
		key, idem, input, format string
		headers                  []string
		partition                partitionFlag
	)
	cmd := &cobra.Command{
		Use:   "publish TOPIC [VALUE]",
		Short: "Publish records",
		Long: `Publish one record with VALUE, or one record per line of standard input.

With --input json each input line is a JSON object with the fields
"key", "value", "headers" (an object of strings) and "idempotency_key".
Prints where each record was stored: partition, offset, message_id.`,
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
			if len(args) == 2 {
				m := base
				m.Value = []byte(args[1])
				res, err := c.Publish(cmd.Context(), topic, m)
				if err != nil {
					return err
				}
				return out.write(res[0])
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
	addFormat(cmd, &format)
	return cmd
}

type jsonInput struct {
	Key            *string           `json:"key"`
	Value          string            `json:"value"`
	Headers        map[string]string `json:"headers"`
	IdempotencyKey string            `json:"idempotency_key"`
	Partition      *uint32           `json:"partition"`
}

// publishLines publishes stdin in batches, in order, and prints a result
// per line.
func publishLines(cmd *cobra.Command, c *client.Client, topic string, base client.Message, input string, r io.Reader, out *resultWriter) error {
	ctx := cmd.Context()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var batch []client.Message
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := c.Publish(ctx, topic, batch...)
		if err != nil {
			return err
		}
		for _, r := range res {
			if err := out.write(r); err != nil {
				return err
			}
		}
		batch = batch[:0]
		return out.flush()
	}
	line := 0
	for sc.Scan() {
		line++
		m := base
		if input == "json" {
			var in jsonInput
			if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
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
			m.Headers = append([]client.Header(nil), base.Headers...)
			for k, v := range in.Headers {
				m.Headers = append(m.Headers, client.Header{Key: k, Value: []byte(v)})
			}
		} else {
			m.Value = append([]byte(nil), sc.Bytes()...)
		}
		batch = append(batch, m)
		if len(batch) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return flush()
}

type resultWriter struct {
	w    *bufio.Writer
	json bool
}

func newResultWriter(format string) *resultWriter {
	return &resultWriter{w: bufio.NewWriter(os.Stdout), json: format == "json"}
}

func (rw *resultWriter) write(r client.Result) error {
	if rw.json {
		b, _ := json.Marshal(map[string]any{"partition": r.Partition, "offset": r.Offset, "message_id": r.MessageID, "duplicate": r.Duplicate})
		rw.w.Write(b)
		rw.w.WriteByte('\n')
	} else {
		fmt.Fprintf(rw.w, "partition=%d offset=%d message_id=%s\n", r.Partition, r.Offset, r.MessageID)
	}
	return rw.w.Flush()
}

func (rw *resultWriter) flush() error { return rw.w.Flush() }
