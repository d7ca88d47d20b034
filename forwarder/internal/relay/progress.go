package relay

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Progress says when publishing makes no progress: every delivery since PublishStallAfter
// ago failed, or a delivery has not returned for PublishStallAfter (the broker died with a
// request in flight: a client that may have sent it neither fails nor retries it until the
// broker is back), while events wait. It warns once per spell, sets
// outboxkit_forwarder_publish_stalled, and logs the recovery at info level.
type Progress struct {
	metrics *Metrics
	log     *slog.Logger
	// stallAfter is Config.PublishStallAfter.
	stallAfter time.Duration

	mu sync.Mutex
	// failingSince is the first failure after the last success (zero while publishing works).
	failingSince time.Time
	lastErr      string
	stalled      bool
	// stalledSince is when the spell being warned about began (failing or hung since).
	stalledSince time.Time
	// started holds the start of every delivery under way, by the token begin gave it.
	started map[uint64]time.Time
	next    uint64
}

// NewProgress returns the progress watch of a relay with these metrics and log, that warns
// after stallAfter without progress.
func NewProgress(m *Metrics, log *slog.Logger, stallAfter time.Duration) *Progress {
	return &Progress{metrics: m, log: log, stallAfter: stallAfter}
}

// Begin records that a delivery starts and returns its token for Delivered.
func (w *Progress) Begin() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started == nil {
		w.started = map[uint64]time.Time{}
	}
	w.next++
	w.started[w.next] = time.Now()
	return w.next
}

// hungSince returns the start of the oldest delivery under way that has run for at least
// after (zero when none has). The caller holds mu.
func (w *Progress) hungSince(after time.Duration) time.Time {
	var oldest time.Time
	for _, at := range w.started {
		if time.Since(at) >= after && (oldest.IsZero() || at.Before(oldest)) {
			oldest = at
		}
	}
	return oldest
}

// Delivered records the outcome of the delivery Begin gave token: a record acknowledged, or
// dead-lettered (the broker took its dead letter), is progress; nothing of that and a failure
// (err, or a record to retry) is not. Publishing has recovered once there is progress and no
// other delivery hangs.
func (w *Progress) Delivered(token uint64, o Outcome, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.started, token)
	progressed := len(o.Acked) > 0
	for _, st := range o.Settled {
		progressed = progressed || st.Dead
	}
	switch {
	case progressed:
		if w.stalled && w.hungSince(w.stallAfter).IsZero() {
			w.log.Info("publishing recovered", "after", time.Since(w.stalledSince).Round(time.Second))
			w.metrics.PublishStalled.Set(0)
			w.stalled = false
		}
		w.failingSince, w.lastErr = time.Time{}, ""
	case err != nil || len(o.Settled) > 0:
		if w.failingSince.IsZero() {
			w.failingSince = time.Now()
		}
		switch {
		case err != nil:
			w.lastErr = err.Error()
		default:
			w.lastErr = o.Settled[0].Reason
		}
	}
}

// Loop warns when publishing has failed, or a delivery has hung, for PublishStallAfter
// without progress.
func (w *Progress) Loop(ctx context.Context) {
	tick := time.NewTicker(max(w.stallAfter/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.check()
	}
}

// check warns once per spell when publishing has made no progress for PublishStallAfter.
func (w *Progress) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stalled {
		return
	}
	since, lastErr := w.failingSince, w.lastErr
	if since.IsZero() || time.Since(since) < w.stallAfter {
		since, lastErr = time.Time{}, ""
	}
	if hung := w.hungSince(w.stallAfter); !hung.IsZero() && (since.IsZero() || hung.Before(since)) {
		since = hung
		if lastErr == "" {
			lastErr = fmt.Sprintf("a publish call has not returned for %s", time.Since(hung).Round(time.Second))
		}
	}
	if since.IsZero() {
		return
	}
	w.stalled, w.stalledSince = true, since
	w.metrics.PublishStalled.Set(1)
	w.log.Warn("publishing makes no progress: deliveries fail or do not return; events wait (broker unreachable or refusing?)",
		"for", time.Since(since).Round(time.Second), "last_error", lastErr)
}
