package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// BlockedGauges are the blocked-keys gauges: how many keys are held back behind a dead or a
// retrying head, and how old the oldest head is. Their series exist from the start, at 0.
type BlockedGauges struct {
	Keys   *prometheus.GaugeVec
	Oldest prometheus.Gauge
}

func NewBlockedGauges(table string) BlockedGauges {
	labels := prometheus.Labels{"table": table}
	g := BlockedGauges{
		Keys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "outboxkit", Subsystem: "forwarder", Name: "blocked_keys",
			ConstLabels: labels,
			Help:        "Ordering keys held back behind a failing head event, by the head's state: dead (waits for an operator) or retrying."},
			[]string{"state"}),
		Oldest: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "outboxkit", Subsystem: "forwarder", Name: "oldest_blocked_key_age_seconds",
			ConstLabels: labels,
			Help:        "Age (from when it became due: its created_at, or a released scheduled event's deliver_at) of the oldest head event holding back a key; 0 when no key is blocked."}),
	}
	g.Keys.WithLabelValues(bookkeeping.StateDead).Set(0)
	g.Keys.WithLabelValues(bookkeeping.StateRetrying).Set(0)
	return g
}

// BlockedSummary counts the blocked keys by their head's status (dead, or pending and failed at
// least once) and returns the earliest time one of the heads became due (its created_at, or a
// released scheduled event's deliver_at).
func BlockedSummary(ctx context.Context, db Querier, stmts sqlstore.Statements) (map[int]int64, time.Time, error) {
	rows, err := stmts.BlockedSummary().Query(ctx, db)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("count blocked keys: %w", err)
	}
	defer rows.Close()
	counts := map[int]int64{}
	var oldest time.Time
	for rows.Next() {
		var status int
		var n int64
		created, getCreated := outbox.TimeScanner()
		if err := rows.Scan(&status, &n, created); err != nil {
			return nil, time.Time{}, fmt.Errorf("count blocked keys: %w", err)
		}
		t, err := getCreated()
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("count blocked keys: %w", err)
		}
		counts[status] = n
		if !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	return counts, oldest, rows.Err()
}
