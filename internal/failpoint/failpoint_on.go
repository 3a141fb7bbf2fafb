//go:build failpoints

package failpoint

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Available reports whether this binary was built with failpoints (the
// build tag `failpoints`). It is true here.
const Available = true

// setting is one set failpoint.
type setting struct {
	value string
	// dur is the value of a failpoint that takes a duration.
	dur time.Duration
}

var registry struct {
	// mu serializes writers; readers load active.
	mu sync.Mutex
	// active is the set failpoints, replaced (never changed) on every
	// change; nil while none is set, so Enabled is one atomic load then.
	active atomic.Pointer[map[string]setting]
	// changed is closed and replaced at every change (under mu): a paused
	// goroutine waits on it to see its pause cleared.
	changed chan struct{}
	// held names the pause points a goroutine waits at; reached holds,
	// per pause point, a channel closed once one does after the last Set.
	held    map[string]bool
	reached map[string]chan struct{}
}

// parse checks value for failpoint name and returns its setting. An empty
// value means "on".
func parse(name, value string) (setting, error) {
	if !slices.Contains(Names(), name) {
		return setting{}, fmt.Errorf("failpoint: unknown failpoint %q; known: %s", name, strings.Join(Names(), ", "))
	}
	if value == "" {
		value = "on"
	}
	s := setting{value: value}
	switch name {
	case FsyncDelay:
		if value == "on" {
			s.dur = 200 * time.Millisecond
			break
		}
		d, err := time.ParseDuration(value)
		if err != nil || d < 0 || d > time.Hour {
			return setting{}, fmt.Errorf("failpoint: %s needs a delay between 0 and 1h such as 200ms, not %q", name, value)
		}
		s.dur = d
	case ClockOffset:
		d, err := time.ParseDuration(value)
		if err != nil || d < -100*24*time.Hour || d > 100*24*time.Hour {
			return setting{}, fmt.Errorf("failpoint: %s needs a signed duration within 100 days such as +5m or -5m, not %q", name, value)
		}
		s.dur = d
	case ResetFail:
		if _, err := strconv.ParseUint(value, 10, 32); err != nil {
			return setting{}, fmt.Errorf("failpoint: %s needs a partition number such as 0, not %q", name, value)
		}
	default:
		if value != "on" {
			return setting{}, fmt.Errorf("failpoint: %s takes no value (set it alone or as %s=on), not %q", name, name, value)
		}
	}
	return s, nil
}

// Enabled reports whether failpoint name is set. It is safe for concurrent
// use and costs one atomic load while no failpoint is set.
func Enabled(name string) bool {
	m := registry.active.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[name]
	return ok
}

// Value returns failpoint name's value ("on" for one set without a value)
// and whether it is set.
func Value(name string) (string, bool) {
	s, ok := lookup(name)
	return s.value, ok
}

func lookup(name string) (setting, bool) {
	m := registry.active.Load()
	if m == nil {
		return setting{}, false
	}
	s, ok := (*m)[name]
	return s, ok
}

// duration returns the delay or offset of a failpoint that takes one.
func duration(name string) (time.Duration, bool) {
	s, ok := lookup(name)
	return s.dur, ok
}

// Set sets failpoint name to value ("" means "on"). An unknown name, or a
// value the failpoint cannot use, is an error that says what is expected;
// nothing is set then.
func Set(name, value string) error {
	s, err := parse(name, value)
	if err != nil {
		return err
	}
	change(func(m map[string]setting) {
		m[name] = s
		delete(registry.reached, name) // Reached: a fresh channel for this setting
	})
	return nil
}

// Clear clears failpoint name; clearing one not set is a no-op.
func Clear(name string) { change(func(m map[string]setting) { delete(m, name) }) }

// take clears failpoint name and reports whether it was set: a failpoint
// that fires once fires for exactly one caller.
func take(name string) bool {
	if !Enabled(name) {
		return false
	}
	taken := false
	change(func(m map[string]setting) {
		_, taken = m[name]
		delete(m, name)
	})
	return taken
}

func change(fn func(map[string]setting)) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	m := map[string]setting{}
	if old := registry.active.Load(); old != nil {
		m = maps.Clone(*old)
	}
	fn(m)
	if len(m) == 0 {
		registry.active.Store(nil)
	} else {
		registry.active.Store(&m)
	}
	if registry.changed != nil {
		close(registry.changed)
		registry.changed = nil
	}
}

// Pause holds the calling goroutine while pause point name is set, if it
// is the first to reach it (see the pause points in names.go); any other
// goroutine, or any while it is not set, returns at once. It ignores
// contexts: a pause left set holds its goroutine for good, so clear it
// before stopping what waits for that goroutine.
func Pause(name string) {
	if !Enabled(name) {
		return
	}
	registry.mu.Lock()
	if registry.held[name] {
		registry.mu.Unlock()
		return
	}
	if registry.held == nil {
		registry.held = map[string]bool{}
	}
	registry.held[name] = true
	if ch := reachedLocked(name); !isClosed(ch) {
		close(ch)
	}
	registry.mu.Unlock()
	defer func() {
		registry.mu.Lock()
		delete(registry.held, name)
		registry.mu.Unlock()
	}()
	for {
		registry.mu.Lock()
		if registry.changed == nil {
			registry.changed = make(chan struct{})
		}
		ch := registry.changed
		registry.mu.Unlock()
		if !Enabled(name) {
			return
		}
		<-ch
	}
}

// Reached returns a channel closed once a goroutine waits at pause point
// name (Pause) since name was last set.
func Reached(name string) <-chan struct{} {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return reachedLocked(name)
}

// reachedLocked returns name's reached channel, made if missing.
func reachedLocked(name string) chan struct{} {
	if registry.reached == nil {
		registry.reached = map[string]chan struct{}{}
	}
	ch, ok := registry.reached[name]
	if !ok {
		ch = make(chan struct{})
		registry.reached[name] = ch
	}
	return ch
}

// Active returns the set failpoints and their values (a new map).
func Active() map[string]string {
	out := map[string]string{}
	if m := registry.active.Load(); m != nil {
		for k, s := range *m {
			out[k] = s.value
		}
	}
	return out
}

// setList sets the failpoints of a list "name=value;name2" (the
// environment variable's format): all of them, or none and an error.
func setList(list string) error {
	var names []string
	var settings []setting
	for item := range strings.SplitSeq(list, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, _ := strings.Cut(item, "=")
		s, err := parse(strings.TrimSpace(name), strings.TrimSpace(value))
		if err != nil {
			return err
		}
		names, settings = append(names, strings.TrimSpace(name)), append(settings, s)
	}
	change(func(m map[string]setting) {
		for i, n := range names {
			m[n] = settings[i]
		}
	})
	return nil
}

// init sets the failpoints REWIND_FAILPOINTS lists. A bad list stops the
// process: a scenario that asked for a fault must not run without it.
func init() {
	if err := setList(os.Getenv(EnvVar)); err != nil {
		fmt.Fprintf(os.Stderr, "rewind: %s: %v\n", EnvVar, err)
		os.Exit(2)
	}
}

// maxForm bounds a request body to the handler.
const maxForm = 64 << 10

// Handler serves the failpoints over HTTP (see the package doc): GET lists
// the set ones and the known ones as JSON; POST or PUT sets the pairs of a
// form (body or query), all or none; DELETE clears one (?name=NAME or
// Path/NAME) or, without a name, all. Bad input gets 400 with the reason.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodPost, http.MethodPut:
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if err := r.ParseForm(); err != nil {
				http.Error(w, "failpoint: bad form: "+err.Error(), http.StatusBadRequest)
				return
			}
			if len(r.Form) == 0 {
				http.Error(w, "failpoint: nothing to set: send name=value pairs (a form body or a query), for example fsync-eio=on or fsync-delay=200ms", http.StatusBadRequest)
				return
			}
			var list []string
			for _, name := range slices.Sorted(maps.Keys(r.Form)) {
				for _, v := range r.Form[name] {
					if strings.Contains(name, ";") || strings.Contains(v, ";") {
						http.Error(w, "failpoint: a name or value may not contain ';'", http.StatusBadRequest)
						return
					}
					list = append(list, name+"="+v)
				}
			}
			if err := setList(strings.Join(list, ";")); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		case http.MethodDelete:
			name := strings.Trim(strings.TrimPrefix(r.URL.Path, Path), "/")
			if name == "" {
				name = r.URL.Query().Get("name")
			}
			switch {
			case name == "":
				change(func(m map[string]setting) { clear(m) })
			case !slices.Contains(Names(), name):
				http.Error(w, fmt.Sprintf("failpoint: unknown failpoint %q; known: %s", name, strings.Join(Names(), ", ")), http.StatusBadRequest)
				return
			default:
				Clear(name)
			}
		default:
			w.Header().Set("Allow", "GET, HEAD, POST, PUT, DELETE")
			http.Error(w, "failpoint: method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Active map[string]string `json:"active"`
			Known  []string          `json:"known"`
		}{Active(), Names()})
	})
}

// Clock returns clock shifted by the ClockOffset failpoint while it is set.
func Clock(clock func() time.Time) func() time.Time {
	return func() time.Time {
		t := clock()
		if d, ok := duration(ClockOffset); ok {
			t = t.Add(d)
		}
		return t
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
