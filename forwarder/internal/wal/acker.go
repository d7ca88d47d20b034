package wal

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// StreamAcknowledger is the acknowledger of the streamed events: they have no row, so it writes
// nothing; it counts the published ones and hands the outcome back. The source parks what the
// broker did not take (park.go), fenced by the leases then.
type StreamAcknowledger struct{ core relay.Core }

// NewStreamAcknowledger returns the acknowledger of the streamed events of core.
func NewStreamAcknowledger(core relay.Core) *StreamAcknowledger {
	return &StreamAcknowledger{core: core}
}

// Acknowledge counts acked as relayed and returns the outcome as it is.
func (a *StreamAcknowledger) Acknowledge(_ context.Context, _ int, _ []relay.Lease, acked []relay.Record, settled []relay.Settlement) (relay.Outcome, map[int]int, error) {
	type label struct{ topic, tenant string }
	counts := map[label]int{}
	now := time.Now()
	var tenant string
	var observe prometheus.Observer // of tenant: looked up again only when the tenant changes
	for _, r := range acked {
		counts[label{r.Event.Topic, r.Event.TenantID}]++
		if observe == nil || r.Event.TenantID != tenant {
			tenant, observe = r.Event.TenantID, a.core.Metrics.CommitToAck.WithLabelValues(r.Event.TenantID)
		}
		observe.Observe(now.Sub(r.Event.CreatedAt).Seconds())
	}
	for l, n := range counts {
		a.core.Metrics.Relayed.WithLabelValues(l.topic, l.tenant).Add(float64(n))
	}
	return relay.Outcome{Acked: acked, Settled: settled}, map[int]int{}, nil
}
