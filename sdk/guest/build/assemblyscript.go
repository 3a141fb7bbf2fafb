package build

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/rewind-io/rewind/internal/npm"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// AssemblyScript builds the AssemblyScript guest project in dir (an npm
// project such as sdk/guest/assemblyscript, whose `npm run build` writes
// build/<name>.wasm) and returns the bytes of build/<name>.wasm.
//
// The first call for a dir in a process runs, in dir:
//
//   - npm ci, only if node_modules is missing or does not match
//     package-lock.json (the versions and integrity hashes recorded in
//     node_modules/.package-lock.json differ from the lockfile's);
//   - npm run build (which itself recompiles only modules older than
//     their sources);
//
// and then reads every build/*.wasm. Later calls for the same dir are
// served from that snapshot, so a process builds once. Calls are safe
// from several goroutines, and several processes (parallel test
// binaries) are serialized by a file lock in os.TempDir on Linux and
// other Unix systems.
//
// Tests call it to build every module they run from source. It needs node
// and npm on PATH (and the npm registry for the first npm ci); without
// them it returns an error wrapping ErrToolMissing.
func AssemblyScript(dir, name string) ([]byte, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("build: AssemblyScript module name %q: want a bare name such as keyprefix", name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	p := ascProjectFor(abs)
	p.once.Do(func() { p.modules, p.err = ascBuildProject(abs) })
	if p.err != nil {
		return nil, p.err
	}
	b, ok := p.modules[name]
	if !ok {
		return nil, fmt.Errorf("build: %s has no module %s (no build/%s.wasm after npm run build)", abs, name, name)
	}
	return bytes.Clone(b), nil
}

// ascProject is the per-process build result of one project directory.
type ascProject struct {
	once    sync.Once
	modules map[string][]byte
	err     error
}

var (
	ascMu       sync.Mutex
	ascProjects = map[string]*ascProject{}
)

func ascProjectFor(dir string) *ascProject {
	ascMu.Lock()
	defer ascMu.Unlock()
	p := ascProjects[dir]
	if p == nil {
		p = &ascProject{}
		ascProjects[dir] = p
	}
	return p
}

func ascBuildProject(dir string) (map[string][]byte, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: AssemblyScript modules need node and npm: %v", ErrToolMissing, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
		return nil, fmt.Errorf("build: %s is not an npm project with a package-lock.json: %w", dir, err)
	}
	sum := sha256.Sum256([]byte(dir))
	lockPath := filepath.Join(os.TempDir(), "rewind-assemblyscript-"+hex.EncodeToString(sum[:8])+".lock")
	unlock, err := ascLock(lockPath)
	if err != nil {
		return nil, fmt.Errorf("build: lock %s: %w", lockPath, err)
	}
	defer unlock()

	fresh, err := npm.Fresh(dir)
	if err != nil {
		return nil, err
	}
	if !fresh {
		if err := ascRun(dir, "npm", "ci", "--no-audit", "--no-fund"); err != nil {
			return nil, err
		}
	}
	if err := ascRun(dir, "npm", "run", "build"); err != nil {
		return nil, err
	}
	paths, err := filepath.Glob(filepath.Join(dir, "build", "*.wasm"))
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	modules := make(map[string][]byte, len(paths))
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("build: %w", err)
		}
		if !bytes.HasPrefix(b, []byte("\x00asm")) {
			return nil, fmt.Errorf("build: %s is not a WebAssembly module", path)
		}
		modules[strings.TrimSuffix(filepath.Base(path), ".wasm")] = b
	}
	return modules, nil
}

// ascRun runs an npm command in dir, returning its output on failure.
func ascRun(dir string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"npm_config_update_notifier=false",
		"npm_config_fund=false",
		"npm_config_audit=false",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("build: %s %s in %s: %w\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return nil
}
