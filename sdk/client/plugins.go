package client

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"strconv"
	"time"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Plugin is one registered version of a filter or transform module.
type Plugin struct {
	Name    string
	Version uint32
	// Module is the module's identity, "sha256:HEX".
	Module      string
	Size        uint64
	UploadTime  time.Time
	Description string
	Imports     []string
	// InputBufferBytes bounds the records the module can take: a record
	// larger than its input buffer cannot be filtered by it. 0 until the
	// module has compiled on the server that answered.
	InputBufferBytes, OutputBufferBytes uint32
	// CompileState says whether the module is compiled on the server that
	// answered: "compiled", "compiling" (an upload compiles in the
	// background; a replay naming it waits), "failed" (CompileError says
	// why) or "not compiled" (it compiles when first used); "" from a
	// server that does not say.
	CompileState string
	CompileError string
}

// Ref returns "NAME@VERSION".
func (p Plugin) Ref() string { return p.Name + "@" + strconv.FormatUint(uint64(p.Version), 10) }

func pluginOf(p *rewindv1.Plugin) Plugin {
	return Plugin{
		Name: p.GetName(), Version: p.GetVersion(), Module: p.GetModule(), Size: p.GetSizeBytes(),
		UploadTime: p.GetUploadTime().AsTime(), Description: p.GetDescription(), Imports: p.GetImports(),
		InputBufferBytes: p.GetInputBufferBytes(), OutputBufferBytes: p.GetOutputBufferBytes(),
		CompileState: compileStates[p.GetCompileState()], CompileError: p.GetCompileError(),
	}
}

var compileStates = map[rewindv1.CompileState]string{
	rewindv1.CompileState_COMPILE_STATE_NOT_COMPILED: "not compiled",
	rewindv1.CompileState_COMPILE_STATE_COMPILING:    "compiling",
	rewindv1.CompileState_COMPILE_STATE_COMPILED:     "compiled",
	rewindv1.CompileState_COMPILE_STATE_FAILED:       "failed",
}

// UploadPlugin checks and registers module as the next version of name;
// the server compiles it in the background (Plugin.CompileState, see
// GetPlugin). unchanged reports that the name's newest version already had these bytes
// (nothing was added). A refused module is InvalidArgument with a
// FilterError detail saying why. It is not repeated after an attempt whose
// node failed (a repeat would report the upload unchanged): the error is
// then ErrOutcomeUnknown.
func (c *Client) UploadPlugin(ctx context.Context, name string, module []byte, description string) (p Plugin, unchanged bool, err error) {
	req := &rewindv1.UploadPluginRequest{Name: name, Module: module, Description: description}
	resp, err := unary(ctx, c, once, func(ctx context.Context, cl *Client) (*rewindv1.UploadPluginResponse, error) {
		return cl.plugins.UploadPlugin(ctx, req)
	})
	if err != nil {
		return Plugin{}, false, err
	}
	return pluginOf(resp.GetPlugin()), resp.GetUnchanged(), nil
}

// ListPlugins lists every registered version (of name, if not empty).
func (c *Client) ListPlugins(ctx context.Context, name string) ([]Plugin, error) {
	resp, err := unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.ListPluginsResponse, error) {
		return cl.plugins.ListPlugins(ctx, &rewindv1.ListPluginsRequest{Name: name})
	})
	if err != nil {
		return nil, err
	}
	out := make([]Plugin, len(resp.GetPlugins()))
	for i, p := range resp.GetPlugins() {
		out[i] = pluginOf(p)
	}
	return out, nil
}

// GetPlugin describes "NAME", "NAME@VERSION" or "sha256:HEX", with the
// module's bytes when withModule is set.
func (c *Client) GetPlugin(ctx context.Context, ref string, withModule bool) (Plugin, []byte, error) {
	k := c.repeatable(0)
	if withModule {
		k = c.repeatable(MaxMessageBytes) // the answer may be that large
	}
	resp, err := unary(ctx, c, k, func(ctx context.Context, cl *Client) (*rewindv1.GetPluginResponse, error) {
		return cl.plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: ref, IncludeModule: withModule})
	})
	if err != nil {
		return Plugin{}, nil, err
	}
	return pluginOf(resp.GetPlugin()), resp.GetModule(), nil
}

// DeletePlugin removes "NAME@VERSION", or every version of "NAME". It is
// not repeated after an attempt whose node failed (a repeat would answer
// NotFound): the error is then ErrOutcomeUnknown.
func (c *Client) DeletePlugin(ctx context.Context, ref string) ([]Plugin, error) {
	resp, err := unary(ctx, c, once, func(ctx context.Context, cl *Client) (*rewindv1.DeletePluginResponse, error) {
		return cl.plugins.DeletePlugin(ctx, &rewindv1.DeletePluginRequest{Plugin: ref})
	})
	if err != nil {
		return nil, err
	}
	out := make([]Plugin, len(resp.GetDeleted()))
	for i, p := range resp.GetDeleted() {
		out[i] = pluginOf(p)
	}
	return out, nil
}

// TestResult is what a module made of one input.
type TestResult struct {
	Input Record
	// Outputs is empty when the input was dropped, the input itself when
	// kept unchanged, or a transform's replacements.
	Outputs []Record
	// Replaced says, per output, whether it is a transform's replacement
	// rather than the input delivered unchanged.
	Replaced []bool
}

// TestReport is the outcome of TestPlugin.
type TestReport struct {
	Module                 string
	Results                []TestResult
	Scanned, Kept, Emitted uint64
	// Failure is set when the module failed; Results stop before the
	// failing batch.
	Failure *rewindv1.FilterError
}

// TestSource is what TestPlugin runs a module over: sample records, or a
// range of a topic.
type TestSource struct {
	// Records are sample inputs (Offset and AppendTime matter; the rest is
	// passed through).
	Records []Record
	// Topic, with From (default earliest), Partitions (default all) and
	// Limit (default 100, at most 10000), reads real records instead.
	Topic      string
	From       *Position
	Partitions []uint32
	Limit      uint32
}

// TestPlugin runs a module (filter: a plugin reference, or inline bytes
// when module is set) over src and returns what it kept or emitted.
func (c *Client) TestPlugin(ctx context.Context, plugin string, module, config []byte, src TestSource) (*TestReport, error) {
	req := &rewindv1.TestPluginRequest{Filter: &rewindv1.ReplayFilter{Config: config}}
	if module != nil {
		req.Filter.Module = &rewindv1.ReplayFilter_Inline{Inline: module}
	} else {
		req.Filter.Module = &rewindv1.ReplayFilter_Plugin{Plugin: plugin}
	}
	if src.Topic != "" {
		tr := &rewindv1.TestTopicRange{Topic: src.Topic, Partitions: src.Partitions, Limit: src.Limit}
		if src.From != nil {
			sp, err := src.From.startProto()
			if err != nil {
				return nil, err
			}
			tr.Start = sp
		}
		req.Input = &rewindv1.TestPluginRequest_Topic{Topic: tr}
	} else {
		rs := &rewindv1.TestRecords{}
		for _, r := range src.Records {
			rs.Records = append(rs.Records, r.proto())
		}
		req.Input = &rewindv1.TestPluginRequest_Records{Records: rs}
	}
	// It changes nothing, but its work (compiling the module, running it
	// over up to 10,000 records) has no bound the client knows: no attempt
	// deadline.
	resp, err := unary(ctx, c, callKind{again: true}, func(ctx context.Context, cl *Client) (*rewindv1.TestPluginResponse, error) {
		return cl.plugins.TestPlugin(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &TestReport{Module: resp.GetModule(), Scanned: resp.GetScanned(), Kept: resp.GetKept(), Emitted: resp.GetEmitted(), Failure: resp.GetError()}
	for _, r := range resp.GetResults() {
		tr := TestResult{Input: recordOf(r.GetInput()), Replaced: r.GetReplaced()}
		for _, o := range r.GetOutputs() {
			tr.Outputs = append(tr.Outputs, recordOf(o))
		}
		out.Results = append(out.Results, tr)
	}
	return out, nil
}

// proto converts a client record for TestPlugin.
func (r Record) proto() *rewindv1.Record {
	p := &rewindv1.Record{
		Partition: r.Partition, Offset: r.Offset, MessageId: r.MessageID, Key: r.Key, Value: r.Value,
		IdempotencyKey: r.IdempotencyKey,
	}
	if !r.AppendTime.IsZero() {
		p.AppendTimeUnixNanos = r.AppendTime.UnixNano()
	}
	if !r.EventTime.IsZero() {
		p.EventTimeUnixNanos = r.EventTime.UnixNano()
	}
	for _, h := range r.Headers {
		p.Headers = append(p.Headers, &rewindv1.Header{Key: h.Key, Value: h.Value})
	}
	return p
}

// FilterFailureOf returns the FilterError detail of an error from a
// filtered subscription or from UploadPlugin: which module failed, where
// (partition, and the offset of the batch), why, and a resume token that
// continues the stream from there. It returns nil for other errors.
func FilterFailureOf(err error) *rewindv1.FilterError {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if fe, ok := v.(*rewindv1.FilterError); ok {
				return fe
			}
		}
	}
	return nil
}
