package runner

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
)

// The clients a workload's publishers can publish through
// (Options.Client). Without one (""), each publisher makes one attempt
// per call with the Go client (2 s, hedged) and retries itself, 20 ms to
// 500 ms apart, so the history holds every attempt; the safety scenarios
// are tuned to that pace (resend-new-leader). The others are given every
// member of the cluster and keep their own defaults (retries, attempt
// timeout, hedging, node penalties), so a run's failover figures are what
// a user of that client feels.
const (
	// ClientGo is the Go client (sdk/client) with its defaults.
	ClientGo = "go"
	// ClientTS is the TypeScript client in Node (sdk/ts), one node
	// process per publisher.
	ClientTS = "ts"
	// ClientCLI is `rewind publish`, one process per record, the runs
	// sharing the node memory (REWIND_NODE_MEMORY) as a user's shell
	// commands share the user's cache.
	ClientCLI = "cli"
)

// sender publishes one record, one call of its client (which may retry
// inside it).
type sender interface {
	send(ctx context.Context, topic string, m client.Message) (client.Result, error)
	close()
}

// newSender returns a publisher's sender of kind (ClientGo, ClientTS or
// ClientCLI) to the cluster at addrs (comma-separated URLs).
func newSender(kind, addrs string, o Options) (sender, error) {
	switch kind {
	case "":
		return goSender{client.New(addrs, client.WithPublishRetry(1, 0, 2*time.Second))}, nil
	case ClientGo:
		return goSender{client.New(addrs)}, nil
	case ClientCLI:
		return &cliSender{binary: o.Binary, addrs: addrs, memory: filepath.Join(o.Dir, "cli-node-memory.json")}, nil
	case ClientTS:
		return startTSSender(o.TSClient, addrs, o.Dir)
	}
	return nil, unknownClient(kind)
}

func unknownClient(kind string) error {
	return fmt.Errorf("unknown client %q (want %s, %s or %s)", kind, ClientGo, ClientTS, ClientCLI)
}

// checkClient refuses an unknown client, or the TypeScript client
// without a built directory, before anything starts.
func checkClient(o Options) error {
	switch o.Client {
	case "", ClientGo, ClientCLI:
		return nil
	case ClientTS:
		if o.TSClient == "" {
			return errors.New("--client ts needs the TypeScript client's directory (--ts-client, e.g. sdk/ts)")
		}
		if _, err := os.Stat(filepath.Join(o.TSClient, "dist", "node.js")); err != nil {
			return fmt.Errorf("the TypeScript client in %s is not built (cd %s && npm ci && npm run build): %w", o.TSClient, o.TSClient, err)
		}
		if _, err := exec.LookPath("node"); err != nil {
			return fmt.Errorf("--client ts needs node: %w", err)
		}
		return nil
	}
	return unknownClient(o.Client)
}

// callTimeout bounds one send of kind: the single attempt of the default
// publishers, or the whole retry policy of a client's.
func callTimeout(kind string) time.Duration {
	if kind == "" {
		return 3 * time.Second
	}
	return 10 * time.Second
}

type goSender struct{ c *client.Client }

func (s goSender) send(ctx context.Context, topic string, m client.Message) (client.Result, error) {
	res, err := s.c.Publish(ctx, topic, m)
	if err != nil {
		return client.Result{}, err
	}
	return res[0], nil
}

func (s goSender) close() {}

// cliSender runs `rewind publish --server ADDRS ... TOPIC VALUE` per record.
type cliSender struct {
	binary, addrs string
	// memory is the node memory file the runs share.
	memory string
}

func (s *cliSender) send(ctx context.Context, topic string, m client.Message) (client.Result, error) {
	args := []string{"publish", "--server", s.addrs, "--format", "json", "--key", string(m.Key), "--idempotency-key", m.IdempotencyKey}
	if m.Partition != nil {
		args = append(args, "--partition", strconv.FormatUint(uint64(*m.Partition), 10))
	}
	args = append(args, "--", topic, string(m.Value))
	cmd := exec.CommandContext(ctx, s.binary, args...)
	cmd.Env = append(os.Environ(), "REWIND_NODE_MEMORY="+s.memory)
	cmd.WaitDelay = time.Second
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		// The command's own words; the run may have stored the record
		// (an unknown outcome), which its idempotency key makes safe to
		// send again.
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return client.Result{}, connect.NewError(connect.CodeUnknown, fmt.Errorf("rewind publish: %s", msg))
	}
	var r struct {
		Partition  uint32 `json:"partition"`
		Offset     uint64 `json:"offset"`
		MessageID  string `json:"message_id"`
		Duplicate  bool   `json:"duplicate"`
		AppendTime string `json:"append_time"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &r); err != nil {
		return client.Result{}, connect.NewError(connect.CodeUnknown, fmt.Errorf("rewind publish printed %q: %w", out.String(), err))
	}
	at, _ := time.Parse(time.RFC3339Nano, r.AppendTime) // zero when missing: replays then start at an offset
	return client.Result{Partition: r.Partition, Offset: r.Offset, MessageID: r.MessageID, Duplicate: r.Duplicate, AppendTime: at}, nil
}

func (s *cliSender) close() {}

// tsPublisher is the Node program of a TypeScript publisher.
//
//go:embed tspublisher.mjs
var tsPublisher []byte

// tsSender sends records to a Node process running tspublisher.mjs: a
// request per line on its standard input, an answer per line on its
// standard output, matched by id.
type tsSender struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *limitedWriter

	mu      sync.Mutex
	next    int
	waiting map[int]chan tsAnswer
	// exited is closed when the process's output ended.
	exited chan struct{}
}

type tsAnswer struct {
	ID              int    `json:"id"`
	Partition       uint32 `json:"partition"`
	Offset          string `json:"offset"`
	MessageID       string `json:"messageId"`
	Duplicate       bool   `json:"duplicate"`
	AppendTimeNanos string `json:"appendTimeNanos"`
	Error           string `json:"error"`
	Code            int    `json:"code"`
	NotStored       bool   `json:"notStored"`
}

// startTSSender starts node on tspublisher.mjs with the TypeScript client
// of sdkDir (its dist/ built: npm ci && npm run build).
func startTSSender(sdkDir, addrs, dir string) (*tsSender, error) {
	abs, err := filepath.Abs(sdkDir) // checked by checkClient
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "tspublisher.mjs")
	if err := os.WriteFile(script, tsPublisher, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("node", script, abs, addrs)
	s := &tsSender{cmd: cmd, stderr: &limitedWriter{n: 64 << 10}, waiting: map[int]chan tsAnswer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	go s.read(stdout)
	return s, nil
}

// read hands each answer to the send waiting for it.
func (s *tsSender) read(stdout io.Reader) {
	defer close(s.exited)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var a tsAnswer
		if json.Unmarshal(sc.Bytes(), &a) != nil {
			continue
		}
		s.mu.Lock()
		ch := s.waiting[a.ID]
		delete(s.waiting, a.ID)
		s.mu.Unlock()
		if ch != nil {
			ch <- a // buffered
		}
	}
}

func (s *tsSender) send(ctx context.Context, topic string, m client.Message) (client.Result, error) {
	q := map[string]any{"topic": topic, "key": string(m.Key), "value": string(m.Value), "idem": m.IdempotencyKey}
	if m.Partition != nil {
		q["partition"] = *m.Partition
	}
	if d, ok := ctx.Deadline(); ok {
		q["timeoutMs"] = max(1, time.Until(d).Milliseconds())
	}
	ch := make(chan tsAnswer, 1)
	s.mu.Lock()
	s.next++
	id := s.next
	q["id"] = id
	s.waiting[id] = ch
	b, _ := json.Marshal(q)
	_, err := s.stdin.Write(append(b, '\n'))
	if err != nil {
		delete(s.waiting, id)
	}
	s.mu.Unlock()
	if err != nil {
		return client.Result{}, fmt.Errorf("the TypeScript publisher: %w (%s)", err, s.stderr.String())
	}
	select {
	case a := <-ch:
		if a.Error != "" {
			err := connect.NewError(connect.Code(a.Code), errors.New(a.Error))
			if a.NotStored {
				err.Meta().Set("Rewind-Not-Stored", "1")
			}
			return client.Result{}, err
		}
		off, _ := strconv.ParseUint(a.Offset, 10, 64)
		ns, _ := strconv.ParseInt(a.AppendTimeNanos, 10, 64)
		return client.Result{Partition: a.Partition, Offset: off, MessageID: a.MessageID, Duplicate: a.Duplicate, AppendTime: time.Unix(0, ns)}, nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.waiting, id) // a late answer is dropped by read
		s.mu.Unlock()
		return client.Result{}, ctx.Err()
	case <-s.exited:
		return client.Result{}, fmt.Errorf("the TypeScript publisher exited: %s", s.stderr.String())
	}
}

// close ends the process: its input closes, and it exits once its calls
// answered.
func (s *tsSender) close() {
	s.stdin.Close()
	t := time.AfterFunc(10*time.Second, func() { _ = s.cmd.Process.Kill() })
	_ = s.cmd.Wait()
	t.Stop()
}

// limitedWriter keeps the first n bytes written to it; safe for
// concurrent use.
type limitedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
