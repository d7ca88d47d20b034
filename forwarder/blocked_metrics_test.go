package forwarder_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// blockedSeries returns the blocked_keys gauge by state and the oldest blocked age (-1 when a
// series is absent).
func blockedSeries(t *testing.T, reg *prometheus.Registry) (dead, retrying, oldest float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	dead, retrying, oldest = -1, -1, -1
	for _, f := range families {
		for _, m := range f.Metric {
			switch f.GetName() {
			case "outboxkit_forwarder_oldest_blocked_key_age_seconds":
				oldest = m.GetGauge().GetValue()
			case "outboxkit_forwarder_blocked_keys":
				for _, l := range m.Label {
					if l.GetName() == "state" && l.GetValue() == admin.StateDead {
						dead = m.GetGauge().GetValue()
					}
					if l.GetName() == "state" && l.GetValue() == admin.StateRetrying {
						retrying = m.GetGauge().GetValue()
					}
				}
			}
		}
	}
	return dead, retrying, oldest
}

// The blocked-keys gauges exist at 0 before the first read, then count a running relay's dead
// and retrying keys and the age of the oldest head (PostgreSQL, MariaDB and SQLite).
func TestBlockedKeysGauges(t *testing.T) {
	for _, dialect := range adminDialects {
		t.Run(string(dialect), func(t *testing.T) {
			f := newParkedFixture(t, dialect)
			f.h.brokers = testsupport.KafkaBrokers(t)
			reg := prometheus.NewRegistry()
			cfg := f.h.config(f.h.publisher())
			cfg.Metrics, cfg.StatsInterval = reg, 50*time.Millisecond
			if _, err := forwarder.New(cfg); err != nil {
				t.Fatal(err)
			}
			if dead, retrying, oldest := blockedSeries(t, reg); dead != 0 || retrying != 0 || oldest != 0 {
				t.Fatalf("before the first read: blocked_keys dead %v retrying %v, oldest age %v; want the three series at 0", dead, retrying, oldest)
			}
			reg = prometheus.NewRegistry()
			cfg.Metrics = reg
			f.h.start(cfg)
			var dead, retrying, oldest float64
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if dead, retrying, oldest = blockedSeries(t, reg); dead == 2 && retrying == 1 && oldest > 0 {
					break
				}
			}
			if dead != 2 || retrying != 1 || oldest <= 0 || oldest > 3600 {
				t.Errorf("blocked_keys dead %v retrying %v, oldest age %v; want 2, 1 and the age of the first dead head", dead, retrying, oldest)
			}
		})
	}
}

// On an empty outbox the backlog gauges exist, at 0, once the relay has read the table: a
// dashboard or an alert sees "nothing waits", not "no data".
func TestBacklogSeriesExistOnAnEmptyOutbox(t *testing.T) {
	h := newHarness(t, outbox.SQLite, kfakeBrokers(t))
	reg := prometheus.NewRegistry()
	cfg := h.config(h.publisher())
	cfg.Metrics, cfg.StatsInterval = reg, 50*time.Millisecond
	h.start(cfg)
	want := []string{"outboxkit_forwarder_pending_rows", "outboxkit_forwarder_dead_rows", "outboxkit_forwarder_oldest_pending_age_seconds"}
	var missing []string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		missing = nil
		for _, name := range want {
			if v := gaugeValue(t, reg, name); v != 0 {
				missing = append(missing, fmt.Sprintf("%s=%v", name, v))
			}
		}
		if len(missing) == 0 {
			return
		}
	}
	t.Errorf("on an empty outbox, want these series at 0 (-1: absent): %v", missing)
}
