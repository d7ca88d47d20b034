package forwarder

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// cdcMetrics are the cdc source's metrics, labelled with the slot.
type cdcMetrics struct {
	lagBytes, lagSeconds, streaming prometheus.Gauge
	slotLost, skipped, takeovers    prometheus.Counter
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
		slotLost: counter("slot_lost_total",
			"Times the slot was found missing or invalidated after this relay had used it; the table was drained and the slot recreated."),
		skipped: counter("skipped_rows_total",
			"Streamed rows left to the retry path because their key was parked (a failed, replayed or dead event)."),
		takeovers: counter("walsender_terminations_total",
			"Walsenders of a stalled relay (no live lease) this relay terminated to take the slot over."),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.lagBytes, m.lagSeconds, m.streaming, m.slotLost, m.skipped, m.takeovers} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register cdc metrics of slot %s: %w", slot, err)
		}
	}
	return m, nil
}
