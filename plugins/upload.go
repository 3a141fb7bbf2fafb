package plugins

import (
	"github.com/rewind-io/rewind/sandbox"
)

// NewUpload checks module with rt, without compiling it (it must parse and
// keep within the limits, importing only what is allowed), and returns the
// command that registers it under name. The caller compiles it in the
// background once it is stored (sandbox.Runtime.Prepare): the exports and
// instantiation are checked then, and its buffer sizes known. Check
// failures are *sandbox.Error of KindInvalid.
func NewUpload(rt *sandbox.Runtime, name, description string, module []byte, now int64) (*Upload, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	info, err := rt.Validate(module)
	if err != nil {
		return nil, err
	}
	return &Upload{
		Name: name, Description: description, Module: module, SHA256: info.SHA256, UploadTime: now,
		Imports: info.Imports,
	}, nil
}
