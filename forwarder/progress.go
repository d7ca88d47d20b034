package forwarder

import (
	"context"
	"sync"
	"time"
)

// progressWatch says when publishing makes no progress: every delivery since PublishStallAfter
// ago failed (the broker is unreachable, or refuses everything) while events wait. It warns once
// per spell, sets outboxkit_forwarder_publish_stalled, and logs the recovery at info level.
type progressWatch struct {
	mu sync.Mutex
	// failingSince is the first failure after the last success (zero while publishing works).
	failingSince time.Time
	lastErr      string
	stalled      bool
}

// delivered records a delivery's outcome: a record acknowledged, or dead-lettered (the broker
// took its dead letter), is progress; nothing of that and a failure (err, or a record to retry)
// is not.
func (f *Forwarder) delivered(o outcome, err error) {
	w := &f.progress
	w.mu.Lock()
	defer w.mu.Unlock()
	progressed := len(o.acked) > 0
	for _, st := range o.settled {
		progressed = progressed || st.dead
	}
	switch {
	case progressed:
		if w.stalled {
			f.log.Info("publishing recovered", "after", time.Since(w.failingSince).Round(time.Second))
			f.metrics.publishStalled.Set(0)
		}
		w.failingSince, w.lastErr, w.stalled = time.Time{}, "", false
	case err != nil || len(o.settled) > 0:
		if w.failingSince.IsZero() {
			w.failingSince = time.Now()
		}
		switch {
		case err != nil:
			w.lastErr = err.Error()
		default:
			w.lastErr = o.settled[0].reason
		}
	}
}

// progressLoop warns when publishing has failed for PublishStallAfter without progress.
func (f *Forwarder) progressLoop(ctx context.Context) {
	tick := time.NewTicker(max(f.cfg.PublishStallAfter/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w := &f.progress
		w.mu.Lock()
		if !w.stalled && !w.failingSince.IsZero() && time.Since(w.failingSince) >= f.cfg.PublishStallAfter {
			w.stalled = true
			f.metrics.publishStalled.Set(1)
			f.log.Warn("publishing makes no progress: every delivery failed; events wait (broker unreachable or refusing?)",
				"for", time.Since(w.failingSince).Round(time.Second), "last_error", w.lastErr)
		}
		w.mu.Unlock()
	}
}
