package adminapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// auditIDsPerLine is how many event ids one audit line lists: an action on more events writes
// several "admin action events" lines after its "admin action" line.
const auditIDsPerLine = 1000

// audit writes an audit record through the logger's handler whatever its level: the handler's
// Enabled check is skipped, so log.level: warn or error does not silence it. Its records carry
// audit=true.
func audit(ctx context.Context, logger *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	rec := slog.NewRecord(time.Now(), level, msg, 0)
	rec.AddAttrs(slog.Bool("audit", true))
	rec.AddAttrs(attrs...)
	_ = logger.Handler().Handle(ctx, rec)
}

// Audit writes an audit record of msg at info through logger (the API's when nil) whatever the
// log level: the console's logins and logouts.
func (a *API) Audit(ctx context.Context, logger *slog.Logger, msg string, attrs ...slog.Attr) {
	if logger == nil {
		logger = a.cfg.Logger
	}
	audit(ctx, logger, slog.LevelInfo, msg, attrs...)
}

// auditAction audits an action: who (the token's name), from where, what, the events it matched
// and the rows it changed, also when it failed after some of its chunks committed (res.Applied
// counts those), then the ids of the matched events, auditIDsPerLine a line: committed=true for
// those in chunks that committed, committed=false for the rest (a dry run, or an error part-way).
func (a *API) auditAction(ctx context.Context, tok Token, remote, via, action string, s Selection,
	res admin.ActionResult, err error) {
	attrs := []slog.Attr{slog.String("who", tok.Name), slog.String("remote", remote), slog.String("via", via),
		slog.String("action", action), slog.Bool("dry_run", s.DryRun), slog.String("selection", s.describe()),
		slog.Int("matched", len(res.Events)), slog.Int64("applied", res.Applied)}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	audit(ctx, a.cfg.Logger, level, "admin action", attrs...)
	committed := min(res.Committed, len(res.Events))
	a.auditEventIDs(ctx, level, tok, action, s, res.Events[:committed], 0, true)
	a.auditEventIDs(ctx, level, tok, action, s, res.Events[committed:], committed, false)
}

// failureLog limits the lines of failed authentications: a bucket of burst lines, refilled by
// one each interval; a line says how many failures were left out before it.
type failureLog struct {
	mu         sync.Mutex
	burst      int
	interval   time.Duration
	tokens     int
	refilled   time.Time
	suppressed int
}

// Bounds of the failed-authentication log: at most failureBurst lines at once, then one per
// failureInterval.
const (
	failureBurst    = 5
	failureInterval = 10 * time.Second
)

func newFailureLog() *failureLog {
	return &failureLog{burst: failureBurst, interval: failureInterval, tokens: failureBurst}
}

// allow reports whether a failure at now is logged, and how many were left out before it.
func (f *failureLog) allow(now time.Time) (bool, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refilled.IsZero() {
		f.refilled = now
	}
	if n := int(now.Sub(f.refilled) / f.interval); n > 0 {
		f.tokens = min(f.burst, f.tokens+n)
		f.refilled = f.refilled.Add(time.Duration(n) * f.interval)
	}
	if f.tokens == 0 {
		f.suppressed++
		return false, 0
	}
	f.tokens--
	left := f.suppressed
	f.suppressed = 0
	return true, left
}

// AuditAuthFailure logs a refused authentication (an unknown token, or a read token on an
// action) from remote, whatever the log level, rate-limited: what the limit left out is counted
// in the next line.
func (a *API) AuditAuthFailure(ctx context.Context, remote, path, via string, code int) {
	ok, left := a.failures.allow(time.Now())
	if !ok {
		return
	}
	audit(ctx, a.cfg.Logger, slog.LevelWarn, "admin authentication failed", slog.String("remote", remote), slog.String("via", via),
		slog.String("path", path), slog.Int("status", code), slog.Int("suppressed_before", left))
}

// auditEventIDs writes the ids of events (the matched events from index from on), auditIDsPerLine
// a line, each line saying whether the change of these events committed.
func (a *API) auditEventIDs(ctx context.Context, level slog.Level, tok Token, action string, s Selection,
	events []admin.ActionEvent, from int, committed bool) {
	for start := 0; start < len(events); start += auditIDsPerLine {
		chunk := events[start:min(start+auditIDsPerLine, len(events))]
		ids := make([]string, len(chunk))
		for i, e := range chunk {
			ids[i] = e.EventID.String()
		}
		audit(ctx, a.cfg.Logger, level, "admin action events", slog.String("who", tok.Name), slog.String("action", action),
			slog.Bool("dry_run", s.DryRun), slog.Int("from", from+start), slog.Bool("committed", committed),
			slog.Any("event_ids", ids))
	}
}
