package relay

import (
	"sync"
	"time"
)

// EveryMinute allows one call a minute; its zero value allows the first. The sources use it to
// warn once a minute, not at every batch, about a failure that repeats at every batch (the
// release of due scheduled events on a table not migrated yet).
type EveryMinute struct {
	mu   sync.Mutex
	last time.Time
}

// Allow reports whether a minute has passed since it last returned true.
func (e *EveryMinute) Allow() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now := time.Now(); e.last.IsZero() || now.Sub(e.last) >= time.Minute {
		e.last = now
		return true
	}
	return false
}
