package forwarder_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// logSink is a log destination safe for concurrent writes.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// line returns the first log line containing every one of parts ("" if none).
func (s *logSink) line(parts ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range strings.SplitSeq(s.buf.String(), "\n") {
		found := true
		for _, p := range parts {
			found = found && strings.Contains(l, p)
		}
		if found {
			return l
		}
	}
	return ""
}

// gaugeValue returns the value of the gauge name (one series), or -1 when there is none.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.Metric) == 1 {
			return f.Metric[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestCDCStalledStreamIsReported: a stream that delivers none of the table's rows while they
// wait is reported within a bounded time: a warning naming the table, the slot, the rows and
// the age of the oldest, the outboxkit_cdc_stalled gauge, and the slot's status (Admin.Slots,
// which `outboxkit status` and `cdc slots` print). The stream is made blind the way an operator
// can: the table's publication, created beforehand, has a row filter no row passes. Once the
// publication is fixed and the slot dropped, the relay drains the stranded rows and the gauge
// falls back to 0.
func TestCDCStalledStreamIsReported(t *testing.T) {
	h := newCDCHarness(t, kfakeBrokers(t))
	table := h.writer.Table()
	pub := testsupport.CDCPublication(t, h.db, table)
	if _, err := h.db.Exec("CREATE PUBLICATION " + pub + " FOR TABLE " + table.Events() +
		" WHERE (seq < 0) WITH (publish = 'insert')"); err != nil {
		t.Fatal(err)
	}
	var logs logSink
	reg := prometheus.NewRegistry()
	cfg := h.config(h.publisher())
	cfg.Metrics, cfg.Logger = reg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.CDC.StallAfter = 2 * time.Second
	// 2 s of StallAfter and at most 2/3 s more for the check are what the relay needs; the bound
	// only stops a test whose relay never reports (how late a report comes on a loaded machine is
	// not the gate's business; the log below shows it).
	const bound = 2 * time.Minute
	h.start(cfg)
	h.waitForStream()
	slot := testsupport.CDCSlot(t, h.db, table, "default")
	keys := keysNamed("s", 10)
	for n := range 5 {
		var events []outbox.Event
		for _, k := range keys {
			events = append(events, h.event(k, n))
		}
		h.write(events...)
	}
	written := time.Now()
	var warning string
	for warning == "" || gaugeValue(t, reg, "outboxkit_cdc_stalled") != 1 {
		if time.Since(written) > bound {
			t.Fatalf("%v after 50 events were written that the stream does not deliver: stalled gauge %v, warning %q",
				bound, gaugeValue(t, reg, "outboxkit_cdc_stalled"), warning)
		}
		time.Sleep(100 * time.Millisecond)
		warning = logs.line("level=WARN", "stall", "table="+table.Events(), "slot="+slot, "rows=50", "oldest=")
	}
	t.Logf("reported %v after the writes: %s", time.Since(written).Round(time.Millisecond), warning)
	checkStrandedStatus(t, h, slot, 50, cfg.CDC.StallAfter)

	// The remedy docs/cdc.md gives: fix the publication, drop the slot; the relay drains the table.
	if _, err := h.db.Exec("ALTER PUBLICATION " + pub + " SET TABLE " + table.Events()); err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(h.db, outbox.Postgres, table.Events())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DropSlot(context.Background(), "default", true); err != nil {
		t.Fatal(err)
	}
	got := consumeDistinct(t, h.brokers, h.topic, 50, 2*time.Minute)
	checkDelivery(t, got, keys, 5)
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for gaugeValue(t, reg, "outboxkit_cdc_stalled") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stalled gauge is still set 2 minutes after the stranded rows were drained")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkStrandedStatus checks that Admin.Slots (what `outboxkit status` and `cdc slots` print)
// reports want rows waiting on the slot, the oldest older than age.
func checkStrandedStatus(t *testing.T, h *harness, slot string, want int64, age time.Duration) {
	t.Helper()
	adm, err := admin.New(h.db, outbox.Postgres, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	slots, err := adm.Slots(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		if s.Name == slot {
			if s.Waiting != want || s.OldestWaiting < age {
				t.Fatalf("Admin.Slots reports %d rows waiting on slot %s, the oldest for %v; want %d, older than %v",
					s.Waiting, slot, s.OldestWaiting, want, age)
			}
			return
		}
	}
	t.Fatalf("Admin.Slots does not list slot %s: %+v", slot, slots)
}

// TestSoakCDCBacklogBeingStreamedIsNotAStall (soak only): rows waiting longer than StallAfter
// while the stream delivers a backlog, through a slow broker, are not reported: the stream makes
// progress. Its verdict depends on timing (a loaded machine can leave the stream without a
// delivery for longer than the 300 ms StallAfter, which is then a stall by definition; it failed
// so once in a clean-clone CI run), so it runs from scripts/soak.sh, repeated.
func TestSoakCDCBacklogBeingStreamedIsNotAStall(t *testing.T) {
	runs := testsupport.Soak(t, 5)
	for i := range runs {
		t.Run(fmt.Sprint(i), backlogBeingStreamedIsNotAStall)
	}
}

func backlogBeingStreamedIsNotAStall(t *testing.T) {
	h := newCDCHarness(t, kfakeBrokers(t))
	var logs logSink
	reg := prometheus.NewRegistry()
	cfg := h.config(&recordingPublisher{Publisher: h.publisher(), delay: 30 * time.Millisecond})
	cfg.Metrics, cfg.Logger = reg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.CDC.StallAfter = 300 * time.Millisecond
	h.start(cfg)
	h.waitForStream()
	keys := keysNamed("b", 50)
	const perKey = 60
	for n := range perKey {
		var events []outbox.Event
		for _, k := range keys {
			events = append(events, h.event(k, n))
		}
		h.write(events...)
	}
	start := time.Now()
	done := make(chan []received, 1)
	go func() { done <- consumeDistinct(t, h.brokers, h.topic, len(keys)*perKey, 60*time.Second) }()
	var got []received
	for got == nil {
		select {
		case got = <-done:
		case <-time.After(20 * time.Millisecond):
			if gaugeValue(t, reg, "outboxkit_cdc_stalled") == 1 {
				t.Fatalf("a backlog being streamed was reported as a stall: %s", logs.line("stall"))
			}
		}
	}
	checkDelivery(t, got, keys, perKey)
	if l := logs.line("stall"); l != "" {
		t.Fatalf("a backlog being streamed was reported as a stall: %s", l)
	}
	t.Logf("%d events streamed in %v (StallAfter %v), no stall reported", len(got), time.Since(start).Round(time.Millisecond), cfg.CDC.StallAfter)
}
