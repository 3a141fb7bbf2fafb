package api

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/plugins"
	"github.com/rewind-io/rewind/sandbox"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// UploadPlugin implements rewindv1connect.PluginServiceHandler.
func (s *Server) UploadPlugin(ctx context.Context, req *rewindv1.UploadPluginRequest) (*rewindv1.UploadPluginResponse, error) {
	p, unchanged, err := s.b.UploadPlugin(ctx, req.GetName(), req.GetDescription(), req.GetModule())
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	return &rewindv1.UploadPluginResponse{Plugin: s.pluginOf(p), Unchanged: unchanged}, nil
}

// ListPlugins implements rewindv1connect.PluginServiceHandler.
func (s *Server) ListPlugins(ctx context.Context, req *rewindv1.ListPluginsRequest) (*rewindv1.ListPluginsResponse, error) {
	out := &rewindv1.ListPluginsResponse{}
	for _, p := range s.b.ListPlugins(req.GetName()) {
		if !s.may(ctx, auth.Describe, pluginRes(p.Name)) {
			continue
		}
		out.Plugins = append(out.Plugins, s.pluginOf(p))
	}
	return out, nil
}

// GetPlugin implements rewindv1connect.PluginServiceHandler.
func (s *Server) GetPlugin(ctx context.Context, req *rewindv1.GetPluginRequest) (*rewindv1.GetPluginResponse, error) {
	p, mod, err := s.b.GetPlugin(req.GetPlugin(), req.GetIncludeModule())
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	return &rewindv1.GetPluginResponse{Plugin: s.pluginOf(p), Module: mod}, nil
}

// DeletePlugin implements rewindv1connect.PluginServiceHandler.
func (s *Server) DeletePlugin(ctx context.Context, req *rewindv1.DeletePluginRequest) (*rewindv1.DeletePluginResponse, error) {
	gone, err := s.b.DeletePlugin(ctx, req.GetPlugin())
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	out := &rewindv1.DeletePluginResponse{}
	for _, p := range gone {
		out.Deleted = append(out.Deleted, s.pluginOf(p))
	}
	return out, nil
}

// TestPlugin implements rewindv1connect.PluginServiceHandler.
func (s *Server) TestPlugin(ctx context.Context, req *rewindv1.TestPluginRequest) (*rewindv1.TestPluginResponse, error) {
	spec, err := filterOf(req.GetFilter())
	if err != nil {
		return nil, err
	}
	if spec == nil {
		return nil, invalidf("filter: a plugin or an inline module is required")
	}
	var in broker.TestInput
	switch v := req.GetInput().(type) {
	case *rewindv1.TestPluginRequest_Records:
		in.Records = v.Records.GetRecords()
	case *rewindv1.TestPluginRequest_Topic:
		in.Topic, in.Partitions, in.Limit = v.Topic.GetTopic(), v.Topic.GetPartitions(), int(v.Topic.GetLimit())
		if in.Topic == "" {
			return nil, invalidf("topic: a name is required")
		}
		if in.Start, err = startOf(v.Topic.GetStart()); err != nil {
			return nil, err
		}
	default:
		return nil, invalidf("input: records or a topic range is required")
	}
	res, err := s.b.TestPlugin(ctx, spec, in)
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	out := &rewindv1.TestPluginResponse{Module: res.Module}
	for _, r := range res.Results {
		out.Results = append(out.Results, &rewindv1.TestResult{Input: r.Input, Outputs: r.Outputs, Replaced: r.Replaced})
		out.Scanned++
		if len(r.Outputs) > 0 {
			out.Kept++
		}
		out.Emitted += uint64(len(r.Outputs))
	}
	if res.Err != nil {
		out.Error = filterErrorOf(res.Err)
	}
	return out, nil
}

// filterOf converts a request's filter; nil when none is asked.
func filterOf(f *rewindv1.ReplayFilter) (*broker.FilterSpec, error) {
	if f == nil {
		return nil, nil
	}
	spec := &broker.FilterSpec{Config: f.GetConfig()}
	switch v := f.GetModule().(type) {
	case *rewindv1.ReplayFilter_Plugin:
		if v.Plugin == "" {
			return nil, invalidf("filter: empty plugin reference")
		}
		spec.Plugin = v.Plugin
	case *rewindv1.ReplayFilter_Inline:
		if len(v.Inline) == 0 {
			return nil, invalidf("filter: empty inline module")
		}
		spec.Inline = v.Inline
	default:
		return nil, invalidf("filter: a plugin or an inline module is required")
	}
	return spec, nil
}

// pluginOf describes p, with where its compile stands on this node.
func (s *Server) pluginOf(p *plugins.Plugin) *rewindv1.Plugin {
	st := s.b.PluginStatus(p)
	out := &rewindv1.Plugin{
		Name: p.Name, Version: p.Version, Module: "sha256:" + p.SHA256, SizeBytes: uint64(p.Size),
		UploadTime: timestamppb.New(unixNano(p.UploadTime)), Description: p.Description, Imports: p.Imports,
		InputBufferBytes: st.InputCap, OutputBufferBytes: st.OutputCap,
		CompileState: compileStates[st.State],
	}
	if st.Err != nil {
		out.CompileError = st.Err.Error()
	}
	return out
}

var compileStates = map[sandbox.State]rewindv1.CompileState{
	sandbox.StateNone:      rewindv1.CompileState_COMPILE_STATE_NOT_COMPILED,
	sandbox.StateCompiling: rewindv1.CompileState_COMPILE_STATE_COMPILING,
	sandbox.StateCompiled:  rewindv1.CompileState_COMPILE_STATE_COMPILED,
	sandbox.StateFailed:    rewindv1.CompileState_COMPILE_STATE_FAILED,
}
