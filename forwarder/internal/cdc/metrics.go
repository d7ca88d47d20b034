package cdc

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// receiveLagBuckets are the buckets of outboxkit_cdc_receive_lag_seconds: 0.5 ms to 5 s.
var receiveLagBuckets = []float64{0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
	0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2, 5}

// metrics are the cdc source's metrics, labelled with the slot.
type metrics struct {
	lagBytes, lagSeconds, streaming prometheus.Gauge
	// stalled, strandedRows, strandedAge: the stall check (stall.go).
	stalled, strandedRows, strandedAge prometheus.Gauge
	slotLost, skipped, takeovers       prometheus.Counter
	// receiveLag: commit (its timestamp in the WAL) to its arrival on the stream.
	receiveLag prometheus.Observer
}

// metricVecs are the cdc metrics, registered by New and labelled with the slot once the
// source knows it (at start: the slot's name includes the installation, read from the table).
type metricVecs struct {
	gauges     map[string]*prometheus.GaugeVec
	counters   map[string]*prometheus.CounterVec
	receiveLag *prometheus.HistogramVec
}

// metricHelp is the help of each cdc gauge and counter, by name.
var metricHelp = map[string]string{
	"slot_lag_bytes":   "WAL bytes between the server's end of WAL (as last reported on the stream) and the position this relay confirmed.",
	"slot_lag_seconds": "Age of the commit of the last transaction taken from the stream when it was taken (0 while the stream is caught up).",
	"streaming":        "1 while this relay streams the slot, 0 while it stands by.",
	"stalled": "1 while the stream has delivered none of the table's rows for CDC.StallAfter although pending rows " +
		"not on the retry path are older than that (stranded); 0 otherwise (docs/cdc.md, Stalls).",
	"stranded_rows": "Pending rows not on the retry path older than CDC.StallAfter, counted while the stream delivers none " +
		"of the table's rows (0 while it delivers).",
	"stranded_oldest_seconds":      "Age of the oldest stranded row (0 when there is none).",
	"slot_lost_total":              "Times the slot was found missing or invalidated after this relay had used it; the table was drained and the slot recreated.",
	"skipped_rows_total":           "Streamed rows left to the retry path because their key was parked (a failed, replayed or dead event).",
	"walsender_terminations_total": "Walsenders of a stalled relay (no live lease) this relay terminated to take the slot over.",
}

func newMetricVecs(reg prometheus.Registerer, table string) (*metricVecs, error) {
	labels := prometheus.Labels{"table": table}
	v := &metricVecs{gauges: map[string]*prometheus.GaugeVec{}, counters: map[string]*prometheus.CounterVec{}}
	var all []prometheus.Collector
	for name, help := range metricHelp {
		if strings.HasSuffix(name, "_total") {
			v.counters[name] = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "outboxkit", Subsystem: "cdc", Name: name,
				Help: help, ConstLabels: labels}, []string{"slot"})
			all = append(all, v.counters[name])
		} else {
			v.gauges[name] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "outboxkit", Subsystem: "cdc", Name: name,
				Help: help, ConstLabels: labels}, []string{"slot"})
			all = append(all, v.gauges[name])
		}
	}
	v.receiveLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "outboxkit", Subsystem: "cdc", Name: "receive_lag_seconds",
		Help: "Time from a transaction's commit (the commit timestamp PostgreSQL writes to the WAL, so the database server's clock) to this relay receiving its commit on the stream: " +
			"the part of commit-to-ack latency spent before the relay sees the event (the walsender's decoding and sending).",
		ConstLabels: labels, Buckets: receiveLagBuckets}, []string{"slot"})
	all = append(all, v.receiveLag)
	if reg == nil {
		return v, nil
	}
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register cdc metrics of table %s: %w", table, err)
		}
	}
	return v, nil
}

// forSlot returns the metrics of slot.
func (v *metricVecs) forSlot(slot string) *metrics {
	g := func(name string) prometheus.Gauge { return v.gauges[name].WithLabelValues(slot) }
	c := func(name string) prometheus.Counter { return v.counters[name].WithLabelValues(slot) }
	return &metrics{
		lagBytes: g("slot_lag_bytes"), lagSeconds: g("slot_lag_seconds"), streaming: g("streaming"),
		stalled: g("stalled"), strandedRows: g("stranded_rows"), strandedAge: g("stranded_oldest_seconds"),
		slotLost: c("slot_lost_total"), skipped: c("skipped_rows_total"), takeovers: c("walsender_terminations_total"),
		receiveLag: v.receiveLag.WithLabelValues(slot),
	}
}
