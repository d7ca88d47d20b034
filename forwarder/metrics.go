package forwarder

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the forwarder's Prometheus metrics. Counters carry the topic and the tenant ("" for
// events without one).
type metrics struct {
	relayed, failed, deadLettered   *prometheus.CounterVec
	deadLetterRefused               *prometheus.CounterVec
	batchSize, publishSeconds       prometheus.Histogram
	commitToAck                     *prometheus.HistogramVec
	pending, oldestAge, dead        *prometheus.GaugeVec
	ownedPartitions, publishStalled prometheus.Gauge
	fencedRows, gapViolations       prometheus.Counter
	blocked                         blockedGauges
	// Exactly-once delivery.
	txCommitted, txAborted, unitsOpened, recoveredRows, foreignCheckpoints prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, table string) (*metrics, error) {
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
	m := &metrics{
		relayed:      counter("relayed_total", "Events published and acknowledged by the broker."),
		failed:       counter("failed_total", "Failed publish attempts (each is retried or dead-lettered)."),
		deadLettered: counter("dead_lettered_total", "Events dead-lettered after their last attempt or a permanent error."),
		deadLetterRefused: counter("dead_letter_refused_total",
			"Events marked dead in the table without a dead letter: the broker refused the dead letter, even reduced to the ids and the reason."),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "batch_size", Help: "Rows claimed per non-empty batch.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(1, 4, 7)}),
		publishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "publish_seconds", Help: "Time to publish one batch and get the broker's acknowledgements.",
			ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		commitToAck: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "commit_to_ack_seconds", Help: "From the event's created_at (written in the business transaction) to the broker's ack.",
			ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}, []string{"tenant"}),
		pending:   gauge("pending_rows", "Rows waiting to be published (including parked retries)."),
		oldestAge: gauge("oldest_pending_age_seconds", "Age of the oldest pending row."),
		dead:      gauge("dead_rows", "Dead-lettered rows kept in the table for an operator."),
		ownedPartitions: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "owned_partitions", Help: "Partitions this relay currently leases.", ConstLabels: labels}),
		publishStalled: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "publish_stalled", ConstLabels: labels,
			Help: "1 while every delivery has failed for PublishStallAfter (the broker unreachable or refusing everything) and events wait; 0 otherwise."}),
		fencedRows: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "fenced_rows_total", ConstLabels: labels,
			Help: "Rows whose acknowledgement was refused because their partition's lease had moved to another relay; the new owner publishes them again."}),
		gapViolations: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outboxkit", Subsystem: "forwarder",
			Name: "gap_violations_total", ConstLabels: labels,
			Help: "Events a publisher acknowledged after an earlier event of the same key failed in the same call (the publisher broke its gapless contract; the key may be out of order)."}),
		txCommitted: plain("transactions_committed_total", "Broker transactions committed (exactly-once delivery)."),
		txAborted: plain("transactions_aborted_total",
			"Broker transactions aborted or of unknown outcome (exactly-once delivery); their events are sent again."),
		unitsOpened: plain("transactional_units_opened_total",
			"Transactional units opened (exactly-once delivery): at each takeover of a partition, and after each aborted transaction."),
		recoveredRows: plain("recovered_rows_total",
			"Rows of a unit's last committed transaction acknowledged by the relay that opened the unit next (exactly-once delivery)."),
		foreignCheckpoints: plain("foreign_checkpoints_total",
			"Unit openings that found the unit's last checkpoint written by another installation and refused it (exactly-once delivery; two installations share a transactional-id prefix)."),
		blocked: newBlockedGauges(table),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.relayed, m.failed, m.deadLettered, m.deadLetterRefused, m.batchSize, m.publishSeconds,
		m.commitToAck, m.pending, m.oldestAge, m.dead, m.ownedPartitions, m.publishStalled, m.fencedRows, m.gapViolations,
		m.txCommitted, m.txAborted, m.unitsOpened, m.recoveredRows, m.foreignCheckpoints, m.blocked.keys, m.blocked.oldest} {
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
