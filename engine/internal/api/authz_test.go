package api

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/rewind-io/rewind/engine/internal/auth"
)

// procedures returns every public procedure and its request type, from the
// generated descriptors.
func procedures(tb testing.TB) map[string]protoreflect.MessageType {
	out := map[string]protoreflect.MessageType{}
	protoregistry.GlobalFiles.RangeFilesByPackage("rewind.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			s := fd.Services().Get(i)
			for j := range s.Methods().Len() {
				m := s.Methods().Get(j)
				mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
				if err != nil {
					tb.Fatal(err)
				}
				out[fmt.Sprintf("/%s/%s", s.FullName(), m.Name())] = mt
			}
		}
		return true
	})
	return out
}

// FuzzNeeds: whatever a request holds, working out the rights it needs
// never panics, and names only operations valid on their resource's kind.
func FuzzNeeds(f *testing.F) {
	procs := procedures(f)
	names := make([]string, 0, len(procs))
	for p := range procs {
		names = append(names, p)
	}
	for i := range names {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte("\x0a\x06orders\x12\x02\x10\x01"))
	}
	e := env{st: &auth.State{ResumeKey: auth.NewResumeKey()}, principal: "p", allCommitted: func(string, string) bool { return false }, pluginNames: func(string) []string { return nil }, now: time.Unix(1e9, 0)}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		p := names[int(which)%len(names)]
		msg := procs[p].New().Interface()
		if proto.Unmarshal(data, msg) != nil {
			return
		}
		fn, ok := needs[p]
		if !ok {
			t.Fatalf("%s has no authorization rule", p)
		}
		for _, n := range fn(e, msg) {
			if !slices.Contains(auth.KindOps[n.res.Kind], n.op) {
				t.Fatalf("%s needs %s on a %s", p, n.op, n.res.Kind)
			}
		}
	})
}
