// Package plugins is the registry of uploaded filter and transform modules:
// names with numbered versions over content-addressed bytes (sha256).
//
// The registry is a piece of replicated state: the metadata state machine
// applies upload and delete commands to it in log order, in the same Pebble
// batch as the rest of its state, so every node holds the same modules.
// Validation (package sandbox) happens before a command is proposed; apply
// is deterministic and never looks at the module's contents beyond hashing
// them.
//
// Layout, under the caller's key prefix P:
//
//	P 'p' <name> 0x00 <version:4>   a version's record (JSON)
//	P 'b' <sha256:32>               module bytes, once per content
//	P 'n' <name>                    the name's next version (never reused)
package plugins

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

var (
	// ErrNotFound: no plugin matches the reference.
	ErrNotFound = errors.New("plugins: not found")
)

// Plugin is one registered version.
type Plugin struct {
	Name        string   `json:"name"`
	Version     uint32   `json:"version"`
	SHA256      string   `json:"sha256"` // hex
	Size        int      `json:"size"`
	UploadTime  int64    `json:"upload_time_ns"`
	Description string   `json:"description,omitempty"`
	Imports     []string `json:"imports,omitempty"`
	InputCap    uint32   `json:"input_cap"`
	OutputCap   uint32   `json:"output_cap"`
}

// Upload is the command that registers a module. The proposer fills in
// everything but the version from validation.
type Upload struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Module      []byte   `json:"module"`
	SHA256      string   `json:"sha256"`
	UploadTime  int64    `json:"upload_time_ns"`
	Imports     []string `json:"imports,omitempty"`
	InputCap    uint32   `json:"input_cap"`
	OutputCap   uint32   `json:"output_cap"`
}

// Delete is the command that removes a version (Version > 0) or all of a
// name's versions.
type Delete struct {
	Name    string `json:"name"`
	Version uint32 `json:"version,omitempty"`
}

// Registry holds the applied registry and a published copy for readers.
type Registry struct {
	db     *pebble.DB
	prefix []byte

	// Applied state, owned by the raft loop.
	names map[string][]*Plugin // versions ascending
	next  map[string]uint32
	dirty bool

	mu struct {
		sync.Mutex
		names map[string][]*Plugin // durable: what readers see
	}
}

// Open loads the registry stored under prefix.
func Open(db *pebble.DB, prefix []byte) (*Registry, error) {
	r := &Registry{db: db, prefix: slices.Clip(prefix), names: map[string][]*Plugin{}, next: map[string]uint32{}}
	start := r.key('p')
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: prefixEnd(start)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		var p Plugin
		if err := json.Unmarshal(it.Value(), &p); err != nil {
			return nil, fmt.Errorf("plugins: record %q: %w", it.Key(), err)
		}
		r.names[p.Name] = append(r.names[p.Name], &p)
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	start = r.key('n')
	it2, err := db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: prefixEnd(start)})
	if err != nil {
		return nil, err
	}
	defer it2.Close()
	for ok := it2.First(); ok; ok = it2.Next() {
		if len(it2.Value()) != 4 {
			return nil, fmt.Errorf("plugins: version counter %q: %d bytes", it2.Key(), len(it2.Value()))
		}
		r.next[string(it2.Key()[len(start):])] = binary.BigEndian.Uint32(it2.Value())
	}
	if err := it2.Error(); err != nil {
		return nil, err
	}
	r.Publish()
	return r, nil
}

func (r *Registry) key(kind byte, parts ...[]byte) []byte {
	k := append(slices.Clip(r.prefix), kind)
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

func (r *Registry) versionKey(name string, v uint32) []byte {
	return binary.BigEndian.AppendUint32(r.key('p', []byte(name), []byte{0}), v)
}

func (r *Registry) moduleKey(sha string) ([]byte, error) {
	raw, err := hex.DecodeString(sha)
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("plugins: bad sha256 %q", sha)
	}
	return r.key('b', raw), nil
}

func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// ApplyUpload registers u in w: a new version, or the newest one when it
// has the same bytes. Call it from the raft loop only.
func (r *Registry) ApplyUpload(w *pebble.Batch, u *Upload) (p *Plugin, unchanged bool, err error) {
	if err := ValidName(u.Name); err != nil {
		return nil, false, err
	}
	vs := r.names[u.Name]
	if n := len(vs); n > 0 && vs[n-1].SHA256 == u.SHA256 {
		return vs[n-1], true, nil
	}
	mk, err := r.moduleKey(u.SHA256)
	if err != nil {
		return nil, false, err
	}
	v := max(r.next[u.Name], 1)
	p = &Plugin{
		Name: u.Name, Version: v, SHA256: u.SHA256, Size: len(u.Module), UploadTime: u.UploadTime,
		Description: u.Description, Imports: u.Imports, InputCap: u.InputCap, OutputCap: u.OutputCap,
	}
	rec, err := json.Marshal(p)
	if err != nil {
		return nil, false, err
	}
	if !r.referenced(u.SHA256) {
		if err := w.Set(mk, u.Module, nil); err != nil {
			return nil, false, err
		}
	}
	if err := w.Set(r.versionKey(p.Name, v), rec, nil); err != nil {
		return nil, false, err
	}
	if err := w.Set(r.key('n', []byte(p.Name)), binary.BigEndian.AppendUint32(nil, v+1), nil); err != nil {
		return nil, false, err
	}
	r.names[p.Name] = append(slices.Clip(vs), p)
	r.next[p.Name] = v + 1
	r.dirty = true
	return p, false, nil
}

// ApplyDelete removes d's versions in w and returns them; the bytes of a
// module no version refers to any more are deleted too.
func (r *Registry) ApplyDelete(w *pebble.Batch, d *Delete) ([]*Plugin, error) {
	vs := r.names[d.Name]
	var gone, kept []*Plugin
	for _, p := range vs {
		if d.Version == 0 || p.Version == d.Version {
			gone = append(gone, p)
		} else {
			kept = append(kept, p)
		}
	}
	if len(gone) == 0 {
		ref := Ref{Name: d.Name, Version: d.Version}
		return nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	for _, p := range gone {
		if err := w.Delete(r.versionKey(p.Name, p.Version), nil); err != nil {
			return nil, err
		}
	}
	if len(kept) == 0 {
		delete(r.names, d.Name)
	} else {
		r.names[d.Name] = kept
	}
	for _, p := range gone {
		if r.referenced(p.SHA256) {
			continue
		}
		mk, err := r.moduleKey(p.SHA256)
		if err != nil {
			return nil, err
		}
		if err := w.Delete(mk, nil); err != nil {
			return nil, err
		}
	}
	r.dirty = true
	return gone, nil
}

// referenced reports whether an applied version refers to sha.
func (r *Registry) referenced(sha string) bool {
	for _, vs := range r.names {
		for _, p := range vs {
			if p.SHA256 == sha {
				return true
			}
		}
	}
	return false
}

// Publish makes the applied registry the one readers see. The metadata
// state machine calls it once what it applied is durable.
func (r *Registry) Publish() {
	if !r.dirty && r.mu.names != nil {
		return
	}
	names := make(map[string][]*Plugin, len(r.names))
	for n, vs := range r.names {
		names[n] = vs
	}
	r.mu.Lock()
	r.mu.names = names
	r.mu.Unlock()
	r.dirty = false
}

// Resolve finds the version ref names. Plugins are shared: do not modify
// them. A sha256 reference resolves to the newest version with those bytes.
func (r *Registry) Resolve(ref Ref) (*Plugin, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref.SHA256 != "" {
		var best *Plugin
		for _, vs := range r.mu.names {
			for _, p := range vs {
				if p.SHA256 == ref.SHA256 && (best == nil || p.UploadTime > best.UploadTime) {
					best = p
				}
			}
		}
		if best == nil {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
		}
		return best, nil
	}
	vs := r.mu.names[ref.Name]
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	if ref.Version == 0 {
		return vs[len(vs)-1], nil
	}
	for _, p := range vs {
		if p.Version == ref.Version {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
}

// List returns every version (of name, if set), by name then version.
func (r *Registry) List(name string) []*Plugin {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Plugin
	for n, vs := range r.mu.names {
		if name == "" || n == name {
			out = append(out, vs...)
		}
	}
	slices.SortFunc(out, func(a, b *Plugin) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version))
	})
	return out
}

// Module reads a registered module's bytes.
func (r *Registry) Module(sha string) ([]byte, error) {
	k, err := r.moduleKey(sha)
	if err != nil {
		return nil, err
	}
	v, closer, err := r.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: sha256:%s", ErrNotFound, sha)
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return slices.Clone(v), nil
}
