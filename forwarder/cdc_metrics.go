package forwarder

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// receiveLagBuckets are the buckets of outboxkit_cdc_receive_lag_seconds: 0.5 ms to 5 s.
var receiveLagBuckets = []float64{0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
	0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2, 5}

// cdcMetrics are the cdc source's metrics, labelled with the slot.
type cdcMetrics struct {
	lagBytes, lagSeconds, streaming prometheus.Gauge
	// stalled, strandedRows, strandedAge: the stall check (cdc_stall.go).
	stalled, strandedRows, strandedAge prometheus.Gauge
	slotLost, skipped, takeovers       prometheus.Counter
	// receiveLag: commit (its timestamp in the WAL) to its arrival on the stream.
	receiveLag prometheus.Histogram
}

func newCDCMetrics(reg prometheus.Registerer, table, slot string) (*cdcMetrics, error) {
	labels := prometheus.Labels{"table": table, "slot": slot}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "outboxkit", Subsystem: "cdc", Name: name, Help: help, ConstLabels: labels})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outboxkit", Subsystem: "cdc", Name: name, Help: help, ConstLabels: labels})
	}
	m := &cdcMetrics{
		lagBytes: gauge("slot_lag_bytes", "WAL bytes between the server's end of WAL (as last reported on the stream) and the position this relay confirmed."),
		lagSeconds: gauge("slot_lag_seconds",
			"Age of the commit of the last transaction taken from the stream when it was taken (0 while the stream is caught up)."),
		streaming: gauge("streaming", "1 while this relay streams the slot, 0 while it stands by."),
		stalled: gauge("stalled", "1 while the stream has delivered none of the table's rows for CDC.StallAfter although pending rows "+
			"not on the retry path are older than that (stranded); 0 otherwise (docs/cdc.md, Stalls)."),
		strandedRows: gauge("stranded_rows", "Pending rows not on the retry path older than CDC.StallAfter, counted while the stream delivers none "+
			"of the table's rows (0 while it delivers)."),
		strandedAge: gauge("stranded_oldest_seconds", "Age of the oldest stranded row (0 when there is none)."),
		slotLost: counter("slot_lost_total",
			"Times the slot was found missing or invalidated after this relay had used it; the table was drained and the slot recreated."),
		skipped: counter("skipped_rows_total",
			"Streamed rows left to the retry path because their key was parked (a failed, replayed or dead event)."),
		takeovers: counter("walsender_terminations_total",
			"Walsenders of a stalled relay (no live lease) this relay terminated to take the slot over."),
		receiveLag: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "outboxkit", Subsystem: "cdc", Name: "receive_lag_seconds",
			Help: "Time from a transaction's commit (the commit timestamp PostgreSQL writes to the WAL, so the database server's clock) to this relay receiving its commit on the stream: " +
				"the part of commit-to-ack latency spent before the relay sees the event (the walsender's decoding and sending).",
			ConstLabels: labels, Buckets: receiveLagBuckets}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.lagBytes, m.lagSeconds, m.streaming, m.stalled, m.strandedRows, m.strandedAge, m.slotLost, m.skipped, m.takeovers, m.receiveLag} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register cdc metrics of slot %s: %w", slot, err)
		}
	}
	return m, nil
}
