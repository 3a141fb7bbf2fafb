package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/stream"
	"github.com/rewind-io/rewind/plugins"
	"github.com/rewind-io/rewind/sandbox"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// ErrNoPlugin is returned for a plugin reference that matches nothing.
var ErrNoPlugin = errors.New("no such plugin")

// FilterSpec is a stream's filter as requested: a registered plugin or an
// inline module, and its config.
type FilterSpec struct {
	Plugin string // "NAME", "NAME@VERSION", "sha256:HEX"
	Inline []byte
	Config []byte
}

// UploadPlugin checks module (without compiling it), registers it as the
// next version of name, and starts compiling it in the background:
// PluginStatus reports how that goes, and a replay naming the module waits
// for it (sandbox.Limits.CompileWaitMillis).
func (b *Broker) UploadPlugin(ctx context.Context, name, description string, module []byte) (*plugins.Plugin, bool, error) {
	if err := b.open(); err != nil {
		return nil, false, err
	}
	u, err := plugins.NewUpload(b.sandbox, name, description, module, b.Now())
	if err != nil {
		return nil, false, pluginError(err)
	}
	p, unchanged, err := b.meta.UploadPlugin(ctx, u)
	if err != nil {
		return nil, false, pluginError(err)
	}
	b.sandbox.Prepare(module)
	return p, unchanged, nil
}

// PluginStatus is where a registered module's compile stands on this node.
type PluginStatus struct {
	State sandbox.State
	// Err says why, for StateFailed.
	Err error
	// InputCap and OutputCap are the module's buffer sizes, once compiled
	// (0 before).
	InputCap, OutputCap uint32
}

// PluginStatus says whether p's module is compiled on this node.
func (b *Broker) PluginStatus(p *plugins.Plugin) PluginStatus {
	st := PluginStatus{InputCap: p.InputCap, OutputCap: p.OutputCap}
	st.State, st.Err = b.sandbox.State(p.SHA256)
	if st.State == sandbox.StateCompiled {
		if m, _ := b.sandbox.Lookup(p.SHA256); m != nil {
			st.InputCap, st.OutputCap = m.Info().InputCap, m.Info().OutputCap
			m.Release()
		}
	}
	return st
}

// ListPlugins lists every registered version (of name, if set).
func (b *Broker) ListPlugins(name string) []*plugins.Plugin { return b.meta.Plugins().List(name) }

// GetPlugin resolves a reference, optionally reading the module's bytes.
func (b *Broker) GetPlugin(ref string, withModule bool) (*plugins.Plugin, []byte, error) {
	r, err := plugins.ParseRef(ref)
	if err != nil {
		return nil, nil, pluginError(err)
	}
	p, err := b.meta.Plugins().Resolve(r)
	if err != nil {
		return nil, nil, pluginError(err)
	}
	if !withModule {
		return p, nil, nil
	}
	mod, err := b.meta.Plugins().Module(p.SHA256)
	return p, mod, pluginError(err)
}

// DeletePlugin removes "NAME@VERSION" or every version of "NAME".
func (b *Broker) DeletePlugin(ctx context.Context, ref string) ([]*plugins.Plugin, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	r, err := plugins.ParseRef(ref)
	if err != nil {
		return nil, pluginError(err)
	}
	if r.SHA256 != "" {
		return nil, fmt.Errorf("%w: delete a plugin by NAME or NAME@VERSION, not by sha256", ErrInvalid)
	}
	gone, err := b.meta.DeletePlugin(ctx, &plugins.Delete{Name: r.Name, Version: r.Version})
	if err != nil {
		return nil, pluginError(err)
	}
	for _, p := range gone {
		if _, err := b.meta.Plugins().Resolve(plugins.Ref{SHA256: p.SHA256}); errors.Is(err, plugins.ErrNotFound) {
			b.sandbox.Forget(p.SHA256)
		}
	}
	return gone, nil
}

// pluginError maps the registry's and sandbox's errors to the broker's.
func pluginError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, plugins.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNoPlugin, err)
	case errors.Is(err, plugins.ErrBadRef):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, sandbox.ErrCompiling):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case errors.Is(err, meta.ErrNotProposed), errors.Is(err, meta.ErrOutcomeUnknown), errors.Is(err, meta.ErrStopped):
		// The metadata group refused or did not answer in time.
		return unavailable(err)
	}
	return err
}

// filter resolves a stream's filter. The caller must call release when the
// stream is over.
func (b *Broker) filter(ctx context.Context, spec *FilterSpec) (f *sandbox.Filter, release func(), err error) {
	var m *sandbox.Module
	switch {
	case spec.Plugin != "" && spec.Inline != nil:
		return nil, nil, fmt.Errorf("%w: a filter names a plugin or carries a module, not both", ErrInvalid)
	case spec.Inline != nil:
		if len(spec.Inline) > b.cfg.MaxInlineModuleBytes {
			return nil, nil, fmt.Errorf("%w: an inline module is %d bytes, over the limit of %d (upload it as a plugin)",
				ErrInvalid, len(spec.Inline), b.cfg.MaxInlineModuleBytes)
		}
		m, err = b.sandbox.Compile(ctx, spec.Inline)
	case spec.Plugin != "":
		var p *plugins.Plugin
		if p, _, err = b.GetPlugin(spec.Plugin, false); err != nil {
			return nil, nil, err
		}
		m, err = b.sandbox.Lookup(p.SHA256)
		if m == nil && err == nil {
			var mod []byte
			if mod, err = b.meta.Plugins().Module(p.SHA256); err != nil {
				return nil, nil, pluginError(err)
			}
			m, err = b.sandbox.Compile(ctx, mod)
		}
	default:
		return nil, nil, fmt.Errorf("%w: a filter needs a plugin or an inline module", ErrInvalid)
	}
	if err != nil {
		return nil, nil, pluginError(err)
	}
	if max := m.Info().InputCap; len(spec.Config) > int(max) {
		m.Release()
		return nil, nil, fmt.Errorf("%w: filter config is %d bytes; the module's input buffer holds %d", ErrInvalid, len(spec.Config), max)
	}
	return m.NewFilter(spec.Config), m.Release, nil
}

// TestResult is what a module did with one input of TestPlugin.
type TestResult struct {
	Input   *rewindv1.Record
	Outputs []*rewindv1.Record
	// Replaced says, per output, whether it is a replacement (action 1).
	Replaced []bool
}

// TestOutcome is TestPlugin's answer.
type TestOutcome struct {
	Module  string // "sha256:HEX"
	Results []TestResult
	// Err is the module's failure (a *stream.FilterError), if it failed;
	// Results stop before the failing batch.
	Err error
}

// TestInput is what TestPlugin runs over: Records, or a range of Topic.
type TestInput struct {
	Records    []*rewindv1.Record
	Topic      string
	Partitions []uint32
	Start      cursor.Start
	Limit      int
}

// MaxTestRecords bounds TestPlugin's inputs.
const MaxTestRecords = 10_000

// TestPlugin runs a filter over sample records or over the first records
// of a topic range (Limit, default 100, partition by partition), and says
// for each input what the module made of it.
func (b *Broker) TestPlugin(ctx context.Context, spec *FilterSpec, in TestInput) (*TestOutcome, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	f, release, err := b.filter(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer release()
	inputs := in.Records
	if in.Topic != "" {
		if inputs, err = b.readForTest(ctx, in); err != nil {
			return nil, err
		}
	}
	if len(inputs) > MaxTestRecords {
		return nil, fmt.Errorf("%w: %d test records, at most %d", ErrInvalid, len(inputs), MaxTestRecords)
	}
	out := &TestOutcome{Module: "sha256:" + f.Module().SHA256()}
	// One batch: Run splits it into calls as a stream's would be, and on
	// failure returns the outputs before the failing call and its index.
	var batch sandbox.Batch
	for _, r := range inputs {
		batch.Add(r.GetOffset(), r.GetAppendTimeUnixNanos(), r.GetKey(), r.GetValue(), len(r.GetHeaders()))
		for _, h := range r.GetHeaders() {
			batch.AddHeader([]byte(h.GetKey()), h.GetValue())
		}
	}
	outs, runErr := f.Run(ctx, &batch, nil)
	done := len(inputs) // inputs the module got through
	if runErr != nil {
		var se *sandbox.Error
		if errors.As(runErr, &se) {
			done = se.Index
		} else {
			done = 0
		}
		r := inputs[min(done, len(inputs)-1)]
		out.Err = &stream.FilterError{Module: out.Module, Partition: r.GetPartition(), Offset: r.GetOffset(), Err: runErr}
	}
	res := make([]TestResult, done)
	for i := range res {
		res[i].Input = inputs[i]
	}
	for _, o := range outs {
		if o.Index >= done {
			break // outputs are in input order
		}
		in := res[o.Index].Input
		res[o.Index].Replaced = append(res[o.Index].Replaced, o.Replaced)
		if !o.Replaced {
			res[o.Index].Outputs = append(res[o.Index].Outputs, in)
			continue
		}
		r := &rewindv1.Record{
			Partition: in.GetPartition(), Offset: in.GetOffset(), MessageId: in.GetMessageId(),
			AppendTimeUnixNanos: in.GetAppendTimeUnixNanos(), IdempotencyKey: in.GetIdempotencyKey(),
			EventTimeUnixNanos: in.GetEventTimeUnixNanos(), Key: o.Key, Value: o.Value,
		}
		for _, h := range o.Headers {
			r.Headers = append(r.Headers, &rewindv1.Header{Key: string(h.Key), Value: h.Value})
		}
		res[o.Index].Outputs = append(res[o.Index].Outputs, r)
	}
	out.Results = res
	return out, nil
}

// readForTest reads the first in.Limit records of a topic range, as a
// replay from in.Start to the end as of now would deliver them.
func (b *Broker) readForTest(ctx context.Context, in TestInput) ([]*rewindv1.Record, error) {
	limit := in.Limit
	if limit <= 0 {
		limit = 100
	}
	if limit > MaxTestRecords {
		return nil, fmt.Errorf("%w: a test reads at most %d records", ErrInvalid, MaxTestRecords)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sink := &collectSink{limit: limit, cancel: cancel}
	err := b.Subscribe(ctx, SubscribeParams{
		Topic: in.Topic, Partitions: in.Partitions, Start: in.Start, Stop: cursor.Stop{Kind: cursor.AtEnd},
		Options: stream.Options{MaxRecordsPerEvent: min(limit, 4096)},
	}, sink)
	if err != nil && !(errors.Is(err, context.Canceled) && sink.full()) {
		return nil, err
	}
	return sink.records, nil
}

// collectSink keeps copies of the first limit records of a stream.
type collectSink struct {
	limit   int
	records []*rewindv1.Record
	cancel  func()
}

func (s *collectSink) full() bool { return len(s.records) >= s.limit }

func (s *collectSink) Send(r *rewindv1.SubscribeResponse) error {
	for _, rec := range r.GetRecords().GetRecords() {
		if s.full() {
			break
		}
		s.records = append(s.records, cloneRecord(rec))
	}
	if s.full() {
		s.cancel()
		return context.Canceled
	}
	return nil
}

func cloneRecord(r *rewindv1.Record) *rewindv1.Record {
	c := &rewindv1.Record{
		Partition: r.Partition, Offset: r.Offset, MessageId: r.MessageId, AppendTimeUnixNanos: r.AppendTimeUnixNanos,
		Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...),
		IdempotencyKey: r.IdempotencyKey, EventTimeUnixNanos: r.EventTimeUnixNanos,
	}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, &rewindv1.Header{Key: h.Key, Value: append([]byte(nil), h.Value...)})
	}
	return c
}
