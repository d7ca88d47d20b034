package relay

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the forwarder's Prometheus metrics. Counters carry the topic and the tenant ("" for
// events without one).
type Metrics struct {
	Relayed, Failed, DeadLettered   *prometheus.CounterVec
	DeadLetterRefused, Unavailable  *prometheus.CounterVec
	BatchSize, PublishSeconds       prometheus.Histogram
	CommitToAck                     *prometheus.HistogramVec
	Pending, OldestAge, Dead        *prometheus.GaugeVec
	OwnedPartitions, PublishStalled prometheus.Gauge
	FencedRows, GapViolations       prometheus.Counter
	Blocked                         BlockedGauges
	// Exactly-once delivery.
	TxCommitted, TxAborted, UnitsOpened, RecoveredRows, ForeignCheckpoints prometheus.Counter
}

func NewMetrics(reg prometheus.Registerer, table string) (*Metrics, error) {
	labels := prometheus.Labels{"table": table}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: name, Help: help, ConstLabels: labels}, []string{"topic", "tenant"})
	}
	plain := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: name, Help: help, ConstLabels: labels})
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: name, Help: help, ConstLabels: labels}, []string{"tenant"})
	}
	m := &Metrics{
		Relayed:      counter("relayed_total", "Events published and acknowledged by the broker."),
		Failed:       counter("failed_total", "Failed publish attempts (each is retried or dead-lettered)."),
		DeadLettered: counter("dead_lettered_total", "Events dead-lettered after their last attempt or a permanent error."),
		DeadLetterRefused: counter("dead_letter_refused_total",
			"Events marked dead in the table without a dead letter: the broker refused the dead letter, even reduced to the ids and the reason."),
		Unavailable: counter("unavailable_total",
			"Events not tried because the publisher reported an outage of what they need (a schema registry not answering): they stay pending, no attempt counted."),
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "batch_size", Help: "Rows claimed per non-empty batch.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(1, 4, 7)}),
		PublishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "publish_seconds", Help: "Time to publish one batch and get the broker's acknowledgements.",
			ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		CommitToAck: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "commit_to_ack_seconds", Help: "From the event's created_at (written in the business transaction) to the broker's ack.",
			ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}, []string{"tenant"}),
		Pending:   gauge("pending_rows", "Rows waiting to be published (including parked retries)."),
		OldestAge: gauge("oldest_pending_age_seconds", "Age of the oldest pending row, from when it became due (a released scheduled event's deliver_at, else its created_at)."),
		Dead:      gauge("dead_rows", "Dead-lettered rows kept in the table for an operator."),
		OwnedPartitions: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "owned_partitions", Help: "Partitions this relay currently leases.", ConstLabels: labels}),
		PublishStalled: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "publish_stalled", ConstLabels: labels,
			Help: "1 while every delivery has failed for PublishStallAfter (the broker unreachable or refusing everything) and events wait; 0 otherwise."}),
		FencedRows: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "fenced_rows_total", ConstLabels: labels,
			Help: "Rows whose acknowledgement was refused because their partition's lease had moved to another relay; the new owner publishes them again."}),
		GapViolations: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "gap_violations_total", ConstLabels: labels,
			Help: "Events a publisher acknowledged after an earlier event of the same key failed in the same call (the publisher broke its gapless contract; the key may be out of order)."}),
		TxCommitted: plain("transactions_committed_total", "Broker transactions committed (exactly-once delivery)."),
		TxAborted: plain("transactions_aborted_total",
			"Broker transactions aborted or of unknown outcome (exactly-once delivery); their events are sent again."),
		UnitsOpened: plain("transactional_units_opened_total",
			"Transactional units opened (exactly-once delivery): at each takeover of a partition, and after each aborted transaction."),
		RecoveredRows: plain("recovered_rows_total",
			"Rows of a unit's last committed transaction acknowledged by the relay that opened the unit next (exactly-once delivery)."),
		ForeignCheckpoints: plain("foreign_checkpoints_total",
			"Unit openings that found the unit's last checkpoint written by another installation and refused it (exactly-once delivery; two installations share a transactional-id prefix)."),
		Blocked: NewBlockedGauges(table),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.Relayed, m.Failed, m.DeadLettered, m.DeadLetterRefused, m.Unavailable, m.BatchSize, m.PublishSeconds,
		m.CommitToAck, m.Pending, m.OldestAge, m.Dead, m.OwnedPartitions, m.PublishStalled, m.FencedRows, m.GapViolations,
		m.TxCommitted, m.TxAborted, m.UnitsOpened, m.RecoveredRows, m.ForeignCheckpoints, m.Blocked.Keys, m.Blocked.Oldest} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				return nil, fmt.Errorf("forwarder metrics for table %s are already registered on this registry: %w", table, err)
			}
			return nil, fmt.Errorf("register forwarder metrics: %w", err)
		}
	}
	return m, nil
}
