package walslot

import (
	"context"
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/outbox"
)

// readTimeout bounds the catalog read of one scrape.
const readTimeout = 5 * time.Second

// Collector exports the slot's state, read from pg_replication_slots at each scrape (so it is
// true also while the relay is stopped or refuses to start, as long as one process of the
// installation serves metrics):
//
//	outboxkit_wal_slot_usable       1 when the slot is registered, exists and is not invalidated;
//	                                0 when writers are refused because of it
//	outboxkit_wal_slot_lag_bytes    WAL between the server's position and the slot's confirmed one
//	outboxkit_wal_slot_safe_bytes   WAL that can still be written before max_slot_wal_keep_size
//	                                invalidates the slot (absent when there is no limit)
//	outboxkit_wal_slot_read_errors_total  scrapes whose catalog read failed (they export nothing else)
//
// all labelled with the table and the slot.
type Collector struct {
	db         *sql.DB
	table      outbox.Table
	slot       string
	usable     *prometheus.Desc
	lag, safe  *prometheus.Desc
	readErrors prometheus.Counter
}

// NewCollector returns the collector of slot, the wal slot of table, read through db.
func NewCollector(db *sql.DB, table outbox.Table, slot string) *Collector {
	labels := prometheus.Labels{"table": table.String(), "slot": slot}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("outboxkit", "wal_slot", name), help, nil, labels)
	}
	return &Collector{
		db: db, table: table, slot: slot,
		usable: desc("usable", "1 when the wal source's replication slot is registered, exists and is not invalidated; "+
			"0 when it is gone or invalidated, and writers are refused (docs/cdc.md, runbook)."),
		lag: desc("lag_bytes", "WAL bytes between the server's current position and the slot's confirmed position: "+
			"what the wal source has not yet confirmed, and what a loss of the slot would lose."),
		safe: desc("safe_bytes", "WAL bytes that can still be written before max_slot_wal_keep_size invalidates the slot "+
			"(pg_replication_slots.safe_wal_size); absent when there is no limit."),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outboxkit", Subsystem: "wal_slot", Name: "read_errors_total",
			Help: "Scrapes whose read of the slot's state failed; they exported no slot state.", ConstLabels: labels}),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.usable
	ch <- c.lag
	ch <- c.safe
	c.readErrors.Describe(ch)
}

// Collect implements prometheus.Collector: one catalog read per scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	st, err := outbox.ReadWALSlot(ctx, c.db, c.table, c.slot)
	if err != nil {
		c.readErrors.Inc()
	} else {
		usable := 0.0
		if st.Usable() {
			usable = 1
		}
		ch <- prometheus.MustNewConstMetric(c.usable, prometheus.GaugeValue, usable)
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(st.LagBytes))
		if st.SafeWALLimited {
			ch <- prometheus.MustNewConstMetric(c.safe, prometheus.GaugeValue, float64(st.SafeWALBytes))
		}
	}
	c.readErrors.Collect(ch)
}
