package client

import "time"

// WithClock replaces the clock of node penalties (tests).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }
