package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rewind-io/rewind/sdk/client"
)

// nodeMemory carries the client's node penalties from one run of the
// command to the next: a member one run found silent (paused, cut off) or
// unreachable is skipped by the runs after it until its penalty ends,
// instead of each run waiting it out (an attempt is 2 s, a hedge 0.5 s).
// It applies to --server lists of several addresses only, and lives in
// the user's cache directory (rewind/nodes.json); REWIND_NODE_MEMORY names
// another file, or is "off".
type nodeMemory struct {
	mu      sync.Mutex
	read    bool
	known   map[string]time.Time
	clients []*client.Client
}

// cliNodePenalty is how long a run of the command skips a node that
// failed, and the runs after it too: longer than the client's default, as
// runs come seconds apart. Any member serves any request, so skipping a
// node that came back costs nothing.
const cliNodePenalty = 30 * time.Second

// nodeMemoryPath is the file of the penalties, "" when off.
func nodeMemoryPath() string {
	switch v := os.Getenv("REWIND_NODE_MEMORY"); v {
	case "off":
		return ""
	case "":
		dir, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(dir, "rewind", "nodes.json")
	default:
		return v
	}
}

// options returns the options of a client of addrs: the remembered
// penalties when addrs lists several nodes (the client is kept, so save
// writes what it learned).
func (m *nodeMemory) options(addrs string) []client.Option {
	if !strings.Contains(addrs, ",") {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.read {
		m.read, m.known = true, readPenalties(nodeMemoryPath())
	}
	return []client.Option{client.WithNodePenalty(cliNodePenalty), client.WithPenalties(m.known)}
}

// keep remembers a client whose penalties save writes.
func (m *nodeMemory) keep(c *client.Client) {
	m.mu.Lock()
	m.clients = append(m.clients, c)
	m.mu.Unlock()
}

// save writes the penalties that have not ended: the file's (another run
// may have written since) and those of the clients kept. Failing to write
// the cache is not the command's failure: the file is only a hint.
func (m *nodeMemory) save() {
	m.mu.Lock()
	defer m.mu.Unlock()
	path := nodeMemoryPath()
	if len(m.clients) == 0 || path == "" {
		return
	}
	all := readPenalties(path)
	for _, c := range m.clients {
		for a, end := range c.Penalties() {
			if end.After(all[a]) {
				all[a] = end
			}
		}
	}
	now := time.Now()
	for a, end := range all {
		if !now.Before(end) {
			delete(all, a)
		}
	}
	b, err := json.Marshal(all)
	if err != nil || os.MkdirAll(filepath.Dir(path), 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".nodes-*.json")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}

// readPenalties reads the file of penalties; a missing or damaged file is
// an empty memory.
func readPenalties(path string) map[string]time.Time {
	out := map[string]time.Time{}
	if path == "" {
		return out
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	if json.Unmarshal(b, &out) != nil {
		return map[string]time.Time{}
	}
	return out
}
