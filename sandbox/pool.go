package sandbox

import "context"

// The idle pool keeps initialised instances for reuse: one per (module,
// config) in use recently, most recently used first in r.mu.idle. It is
// bounded in count (MaxIdleInstances) and in linear memory
// (MaxIdleMemoryBytes): a guest's memory never shrinks, so an idle
// instance pins the most its guest ever grew to, and a node that keeps
// instances of many configs would otherwise hold MaxIdleInstances times
// MaxMemoryPages (2 GiB by default) after every stream ended. Past either
// bound the least recently used instances are closed (and counted in
// Stats.IdleEvictions); an instance in use is never counted or closed here.
//
// Invariant (under r.mu): r.mu.idleBytes is the sum of idleBytes over the
// instances in r.mu.idle, and is at most MaxIdleMemoryBytes once putIdle
// returns.

// takeIdle takes an idle instance of m initialised with config key, or
// returns nil.
func (r *Runtime) takeIdle(m *Module, key string) *instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	for e := r.mu.idle.Front(); e != nil; e = e.Next() {
		if in := e.Value.(*instance); in.m == m && in.key == key {
			r.mu.idle.Remove(e)
			r.mu.idleBytes -= in.idleBytes
			return in
		}
	}
	return nil
}

// putIdle keeps an instance for reuse after its run, closing the least
// recently used idle instances beyond MaxIdleInstances and
// MaxIdleMemoryBytes (this one too when it alone is larger).
func (r *Runtime) putIdle(in *instance) {
	in.idleBytes = int64(in.mem.Size()) // constant while idle: nothing runs it
	var evict []*instance
	r.mu.Lock()
	switch {
	case r.mu.closed:
		evict = append(evict, in)
	case in.idleBytes > r.lim.MaxIdleMemoryBytes:
		evict = append(evict, in)
		r.stats.idleEvictions.Add(1)
	default:
		r.mu.idle.PushFront(in)
		r.mu.idleBytes += in.idleBytes
		for r.mu.idle.Len() > r.lim.MaxIdleInstances || r.mu.idleBytes > r.lim.MaxIdleMemoryBytes {
			old := r.mu.idle.Remove(r.mu.idle.Back()).(*instance)
			r.mu.idleBytes -= old.idleBytes
			evict = append(evict, old)
			r.stats.idleEvictions.Add(1)
		}
	}
	r.mu.Unlock()
	for _, old := range evict {
		old.close(old.ctx) // outside the lock: closing frees the memory
	}
}

// dropIdle closes m's idle instances (m is being closed).
func (r *Runtime) dropIdle(m *Module) {
	var drop []*instance
	r.mu.Lock()
	for e := r.mu.idle.Front(); e != nil; {
		next := e.Next()
		if in := e.Value.(*instance); in.m == m {
			r.mu.idle.Remove(e)
			r.mu.idleBytes -= in.idleBytes
			drop = append(drop, in)
		}
		e = next
	}
	r.mu.Unlock()
	ctx := context.Background()
	for _, in := range drop {
		in.close(ctx)
	}
}

// idleStats returns the idle instances and their linear memory in bytes.
func (r *Runtime) idleStats() (n int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.idle.Len(), r.mu.idleBytes
}
