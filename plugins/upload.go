package plugins

import (
	"context"

	"github.com/rewind-io/rewind/sandbox"
)

// NewUpload validates module with rt (it must parse, compile within bounds,
// speak ABI v1, import only what is allowed and instantiate) and returns
// the command that registers it under name. Validation failures are
// *sandbox.Error of KindInvalid.
func NewUpload(ctx context.Context, rt *sandbox.Runtime, name, description string, module []byte, now int64) (*Upload, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	m, err := rt.Compile(ctx, module)
	if err != nil {
		return nil, err
	}
	defer m.Release()
	info := m.Info()
	return &Upload{
		Name: name, Description: description, Module: module, SHA256: info.SHA256, UploadTime: now,
		Imports: info.Imports, InputCap: info.InputCap, OutputCap: info.OutputCap,
	}, nil
}
