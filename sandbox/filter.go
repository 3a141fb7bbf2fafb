package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync/atomic"
)

// Filter is a module with its config: what one replay runs. It is cheap;
// instances are taken from the runtime's pool for each Run. A Filter is
// safe for concurrent use.
type Filter struct {
	m      *Module
	config []byte
	key    string
	// fuel is what this filter's calls burned since TakeFuel last read it.
	fuel atomic.Uint64
}

// TakeFuel returns the fuel the filter's calls burned since the last
// TakeFuel, and starts counting again (a per-principal fuel quota charges
// it; package quota).
func (f *Filter) TakeFuel() uint64 { return f.fuel.Swap(0) }

// NewFilter returns a filter running m with config (given to rewind_init).
// config is copied. The filter uses m's reference: keep m until the filter
// is no longer used.
func (m *Module) NewFilter(config []byte) *Filter {
	return &Filter{m: m, config: append([]byte(nil), config...), key: configKey(config)}
}

func configKey(config []byte) string {
	s := sha256.Sum256(config)
	return hex.EncodeToString(s[:])
}

// Module returns the filter's module.
func (f *Filter) Module() *Module { return f.m }

// MaxRecordsPerCall bounds a useful Batch: Run splits larger ones.
func (f *Filter) MaxRecordsPerCall() int { return f.m.r.lim.MaxRecordsPerCall }

// InputCap bounds the encoded size of one call's records (the module's
// input buffer and MaxInputBytes): a record larger than this cannot be
// filtered.
func (f *Filter) InputCap() int {
	return min(int(f.m.info.InputCap), f.m.r.lim.MaxInputBytes)
}

// Run filters the records of b, appending the outputs to dst in input
// order. It splits b into calls of at most MaxRecordsPerCall records and
// InputCap bytes, and retries with fewer records when the guest's output
// buffer is full. On failure it returns the outputs of the calls that
// succeeded and an *Error whose Index is the first record of the failing
// call, and whose Record and Offset name the record the guest failed on
// when Run can tell (locate); the instance that failed is discarded.
//
// Run waits for a free guest-call slot (MaxConcurrentCalls) first; ctx
// bounds that wait, not instantiation or the guest calls, which fuel
// bounds.
func (f *Filter) Run(ctx context.Context, b *Batch, dst []Output) ([]Output, error) {
	if b.Len() == 0 {
		return dst, nil
	}
	r := f.m.r
	if err := r.acquireCall(ctx); err != nil {
		return dst, err
	}
	defer r.releaseCall()
	in, err := f.instance()
	if err != nil {
		r.countFailure(err)
		return dst, withIndex(err, 0)
	}
	dst, err = f.run(in, b, dst)
	if err != nil {
		r.countFailure(err)
		in.close(in.ctx)
		return dst, err
	}
	r.putIdle(in)
	return dst, nil
}

// countFailure counts a failed run by its kind (Stats).
func (r *Runtime) countFailure(err error) {
	if e, ok := err.(*Error); ok && int(e.Kind) < len(r.stats.failures) {
		r.stats.failures[e.Kind].Add(1)
	}
}

func withIndex(err error, i int) error {
	if e, ok := err.(*Error); ok {
		e.Index, e.Located = i, false
	}
	return err
}

func (f *Filter) run(in *instance, b *Batch, dst []Output) ([]Output, error) {
	lim := f.m.r.lim
	inCap := min(int(in.inCap), lim.MaxInputBytes)
	n := b.Len()
	for i := 0; i < n; {
		j := min(n, i+lim.MaxRecordsPerCall)
		for j > i && b.starts[i]+inCap < spanEnd(b, j) {
			j--
		}
		if j == i {
			return dst, f.locate(b, &Error{Kind: KindLimit, Module: f.m.sha,
				Reason: fmt.Sprintf("a record is %d bytes encoded; the module's input buffer holds %d", b.recordSize(i), inCap)}, i, i+1)
		}
		for {
			before := len(dst)
			var full bool
			var err error
			dst, full, err = f.call(in, b, i, j, dst)
			if err != nil {
				return dst[:before], f.locate(b, err, i, j)
			}
			if !full {
				break
			}
			if j-i == 1 {
				return dst, f.locate(b, &Error{Kind: KindLimit, Module: f.m.sha,
					Reason: fmt.Sprintf("the outputs of one record do not fit the module's output buffer (%d bytes)", in.outCap)}, i, j)
			}
			j = i + (j-i)/2
		}
		i = j
	}
	return dst, nil
}

// locate places err, the failure of a call over records [i, j) of b: its
// Index is i, and its Record and Offset the record the guest failed on
// when that can be told. A call of one record failed on it. A trap or a
// guest's failure (a Go guest's recovered panic) in a call of several is
// narrowed down (narrow); other failures of a call of several are not
// located: running out of fuel or malformed output is the doing of the
// whole call.
func (f *Filter) locate(b *Batch, err error, i, j int) error {
	e, ok := err.(*Error)
	if !ok {
		return err
	}
	e.Index, e.Located = i, false
	k := i
	if j-i > 1 {
		if e.Kind != KindTrap && e.Kind != KindGuest {
			return e
		}
		if k = f.narrow(b, i, j, e.Kind); k < 0 {
			return e
		}
	}
	e.Located, e.Record, e.Offset = true, k, b.offset(k)
	return e
}

// narrow finds the record of [i, j) on which a call over them failed with
// kind, by halves: it runs the first half again, on a fresh instance (the
// one that failed is discarded); if that fails so, the record is in it,
// otherwise in the second half, which runs next on the same instance, as the record
// would have in the failed call. The outputs are discarded: Run reports
// the failed call as before, and this only names its record. It costs at
// most about log2(MaxRecordsPerCall)+1 calls and as many instances, each
// bounded by its fuel, and happens once per failed Run. It returns -1
// when the failure does not happen again (a guest whose crash depends on
// more than its records, such as memory grown over earlier calls).
func (f *Filter) narrow(b *Batch, i, j int, kind Kind) int {
	var in *instance
	defer func() {
		if in != nil {
			in.close(in.ctx)
		}
	}()
	var outs []Output
	failed := false // [i, j) was seen to fail from a fresh instance
	for i < j {
		if j-i == 1 && failed {
			return i
		}
		if in == nil {
			var err error
			if in, err = f.m.newInstance(f.config, true); err != nil {
				return -1
			}
		}
		mid := i + max(1, (j-i)/2)
		var err error
		outs, _, err = f.call(in, b, i, mid, outs[:0])
		switch {
		case err == nil:
			i, failed = mid, false
		case KindOf(err) == kind:
			in.close(in.ctx)
			in = nil
			j, failed = mid, true
		default:
			return -1
		}
	}
	return -1
}

// spanEnd is where record j starts (the end of records before it).
func spanEnd(b *Batch, j int) int {
	if j < len(b.starts) {
		return b.starts[j]
	}
	return len(b.buf)
}

// call runs one guest call over records [i, j) of b.
func (f *Filter) call(in *instance, b *Batch, i, j int, dst []Output) ([]Output, bool, error) {
	lim := f.m.r.lim
	data := b.span(i, j)
	if !in.mem.Write(in.in, data) {
		return dst, false, errorf(KindTrap, f.m.sha, "input buffer no longer inside memory")
	}
	in.stack[0], in.stack[1] = uint64(j-i), uint64(len(data))
	in.begin(lim.FuelPerCall)
	err := in.filter.CallWithStack(in.ctx, in.stack[:])
	f.m.r.stats.calls.Add(1)
	burned := uint64(lim.FuelPerCall - max(in.fuelLeft(), 0))
	f.m.r.stats.fuel.Add(burned)
	f.fuel.Add(burned)
	in.flushLogs()
	if err != nil {
		return dst, false, in.classify(err, "rewind_filter", lim.FuelPerCall)
	}
	rc := int32(in.stack[0])
	switch {
	case rc == -2:
		return dst, true, nil
	case rc < 0:
		return dst, false, errorf(KindGuest, f.m.sha, "rewind_filter returned %d: %s", rc, in.message())
	case uint32(rc) > in.outCap:
		return dst, false, errorf(KindOutput, f.m.sha, "rewind_filter returned %d output bytes; its output buffer holds %d", rc, in.outCap)
	case int(rc) > lim.MaxOutputBytes:
		return dst, false, errorf(KindLimit, f.m.sha, "%d output bytes in one call, over the limit of %d", rc, lim.MaxOutputBytes)
	}
	out, ok := in.mem.Read(in.out, uint32(rc))
	if !ok {
		return dst, false, errorf(KindOutput, f.m.sha, "output buffer no longer inside memory")
	}
	before := len(dst)
	dst, err = decodeOutputs(dst, out, j-i, lim.MaxOutputsPerInput)
	if err != nil {
		e := err.(*Error)
		e.Module = f.m.sha
		return dst[:before], false, e
	}
	for k := before; k < len(dst); k++ {
		dst[k].Index += i
	}
	return dst, false, nil
}

// instance takes an idle instance initialised with f's config, or makes
// one.
func (f *Filter) instance() (*instance, error) {
	if in := f.m.r.takeIdle(f.m, f.key); in != nil {
		return in, nil
	}
	return f.m.newInstance(f.config, true)
}
