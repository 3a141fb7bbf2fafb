package main

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/rewind-io/rewind/internal/memlimit"
)

// cacheFlags are serve's memory caches that follow the container's limit
// when the user sets none of them.
var cacheFlags = []string{"tail-cache-mib", "store-cache-mib", "tier-cache-mib"}

const (
	// goLimitShare of the container's limit is the Go memory limit serve
	// sets when GOMEMLIMIT is not set: the rest is for what Go does not
	// count (thread stacks of cgo, the page cache charged to the cgroup,
	// fragmentation).
	goLimitShare = 0.9
	// cacheShare is the most of the memory budget each cache may take by
	// default: three caches at an eighth leave over half of it for the
	// heap of streams, queued publishes and Pebble's memtables.
	cacheShare = 8
)

// memoryPlan is what serve does about the memory it may use.
type memoryPlan struct {
	limit memlimit.Limit
	// budget is what the caches are sized against: the smaller of the
	// container's limit and a GOMEMLIMIT of the user's; 0 when neither.
	budget int64
	// goLimit is the Go memory limit to set; 0 leaves Go's (the user's
	// GOMEMLIMIT, or none).
	goLimit int64
	// caps lowers these cache flags to these MiB.
	caps map[string]int64
}

// planMemory decides serve's memory from the container's limit lim and
// the Go memory limit of the user's GOMEMLIMIT (userGoLimit; math.MaxInt64
// when none or "off", userSet whether GOMEMLIMIT is set at all): the Go
// limit at 90% of the container's unless the user set one, and each cache
// whose flag the user did not set (fs: serve's flags after applyConfig)
// at most an eighth of the budget, at least 1 MiB.
func planMemory(fs *pflag.FlagSet, lim memlimit.Limit, userSet bool, userGoLimit int64) memoryPlan {
	p := memoryPlan{limit: lim, budget: lim.Bytes, caps: map[string]int64{}}
	if userSet && userGoLimit < math.MaxInt64 && (p.budget == 0 || userGoLimit < p.budget) {
		p.budget = userGoLimit
	}
	if !userSet && lim.Bytes > 0 {
		p.goLimit = int64(float64(lim.Bytes) * goLimitShare)
	}
	if p.budget == 0 {
		return p
	}
	capMiB := max(p.budget/cacheShare>>20, 1)
	for _, name := range cacheFlags {
		f := fs.Lookup(name)
		if f == nil || f.Changed {
			continue
		}
		if cur, err := strconv.ParseInt(f.Value.String(), 10, 64); err == nil && cur > capMiB {
			p.caps[name] = capMiB
		}
	}
	return p
}

// apply sets the Go memory limit with setLimit (debug.SetMemoryLimit)
// and the capped flags, and logs the decision.
func (p memoryPlan) apply(fs *pflag.FlagSet, log hclog.Logger, setLimit func(int64) int64) {
	if p.goLimit > 0 {
		setLimit(p.goLimit)
	}
	for name, mib := range p.caps {
		// Not fs.Set: the user did not set the flag.
		_ = fs.Lookup(name).Value.Set(strconv.FormatInt(mib, 10))
	}
	kv := []any{"container-limit", bytesOrNone(p.limit.Bytes)}
	if p.limit.File != "" {
		kv = append(kv, "from", p.limit.File)
	}
	switch {
	case p.goLimit > 0:
		kv = append(kv, "go-memory-limit", bytesOrNone(p.goLimit))
	case p.budget > 0:
		kv = append(kv, "go-memory-limit", "GOMEMLIMIT")
	}
	for _, name := range cacheFlags {
		if f := fs.Lookup(name); f != nil {
			kv = append(kv, name, f.Value.String())
		}
	}
	switch {
	case p.budget == 0:
		log.Info("memory: no container limit or GOMEMLIMIT, caches as configured", kv...)
	case len(p.caps) > 0:
		log.Info("memory: caches the configuration leaves unset capped at an eighth of the limit", kv...)
	default:
		log.Info("memory: caches as configured", kv...)
	}
}

// userGoMemLimit reports whether GOMEMLIMIT is set, and the limit Go
// runs with (math.MaxInt64: none).
func userGoMemLimit() (bool, int64) {
	return os.Getenv("GOMEMLIMIT") != "", debug.SetMemoryLimit(-1)
}

// bytesOrNone renders a limit for the log.
func bytesOrNone(n int64) string {
	if n <= 0 || n == math.MaxInt64 {
		return "none"
	}
	return strconv.FormatInt(n>>20, 10) + "MiB"
}
