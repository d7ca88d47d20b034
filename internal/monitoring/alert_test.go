package monitoring

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/outboxkit/outboxkit/outbox"
)

// The dedicated Kafka of this package: other ports and another state directory than the
// shared test services and than internal/faultinject's broker (whose tests may run at the same
// time), so stopping it disturbs nobody.
const (
	kafkaStateDir       = "/var/tmp/outboxkit-monitoring"
	kafkaPort           = 29592
	kafkaControllerPort = 29593
)

// testOverrides shorten the committed rules' thresholds for the real-Prometheus test. Only the
// numbers change: the tested expressions are the committed ones.
var testOverrides = map[string]Override{
	"OutboxBacklogTooOld": {Replace: map[string]string{"> 300": "> 8"}, For: "3s"},
	"OutboxRelayDown":     {For: "2s"},
	"OutboxKeyBlocked":    {Replace: map[string]string{"> 900": "> 8"}, For: "3s"},
}

// TestBacklogAlertFiresWhenTheBrokerStops runs a real Prometheus (Debian's prometheus binary,
// its own port and storage) on a copy of the committed alert rules with short thresholds. It
// scrapes a running `outboxkit relay` that relays a PostgreSQL outbox to a dedicated Kafka
// while events keep being written. Nothing fires while Kafka runs; once Kafka is stopped, the
// backlog-age alert must fire for the relay's table. The dashboard's queries are then run
// against the same Prometheus, and killing the relay must fire the relay-down alert.
func TestBacklogAlertFiresWhenTheBrokerStops(t *testing.T) {
	prometheusBin := binary(t, "prometheus")
	tool := promtool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	logf := func(format string, args ...any) {
		t.Helper()
		t.Logf("%5.1fs "+format, append([]any{time.Since(start).Seconds()}, args...)...)
	}

	run := setUpBrokerStop(t, ctx, kafkaStateDir, kafkaPort, kafkaControllerPort, "monitoring", logf)
	name, topic, broker := run.name, run.topic, run.broker
	relayAddr := freeAddr(t)
	relay := startRelay(t, ctx, run.bin, run.dir, relayAddr, run.relayConfig(relayAddr, map[string]any{
		"unlimited_retries": true, "initial_interval": "100ms", "max_interval": "1s",
		"max_poll_interval": "500ms", "dead_letter_topic": topic + "-dlq", "relay_id": "monitoring-test"}))

	prom := startPrometheus(t, ctx, tool, prometheusBin, relayAddr)
	writes := startWriting(t, run.db, run.table, topic)

	logf("relay healthy, Prometheus ready, writing; waiting until Prometheus has scraped relayed events")
	relayed := fmt.Sprintf(`sum(outboxkit_forwarder_relayed_total{job="outboxkit-relay", table=%q}) > 0`, name)
	waitFor(t, ctx, 2*time.Minute, "Prometheus to see relayed events", func() (bool, string) {
		s, err := prom.Query(ctx, relayed)
		return err == nil && len(s) > 0, fmt.Sprintf("query %s: %d series, %v; writes: %s", relayed, len(s), err, writes.status())
	})
	// With Kafka running, nothing may fire once the first events (delayed by the topic's
	// creation) are through: an alert whose expression always holds would keep firing.
	logf("relayed events scraped; waiting until no alert is active")
	waitFor(t, ctx, 2*time.Minute, "no active alert while Kafka runs", func() (bool, string) {
		alerts, err := prom.Alerts(ctx)
		return err == nil && len(alerts) == 0, fmt.Sprintf("alerts %v (%v)", alerts, err)
	})

	logf("stopping the dedicated Kafka; writes go on")
	if err := broker.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	logf("Kafka stopped")
	var fired Alert
	waitFor(t, ctx, 3*time.Minute, "OutboxBacklogTooOld to fire", func() (bool, string) {
		alerts, err := prom.Alerts(ctx)
		for _, a := range alerts {
			if a.Labels["alertname"] == "OutboxBacklogTooOld" && a.Labels["table"] == name && a.State == "firing" {
				fired = a
				return true, ""
			}
		}
		age, _ := prom.Query(ctx, fmt.Sprintf("outboxkit_forwarder_oldest_pending_age_seconds{table=%q}", name))
		return false, fmt.Sprintf("alerts %v (%v), oldest pending age %v, writes: %s", alerts, err, age, writes.status())
	})
	logf("OutboxBacklogTooOld firing %s after Kafka stopped: %v, value %s, %q",
		time.Since(stopped).Round(time.Second), fired.Labels, fired.Value, fired.Annotations["summary"])
	if fired.Labels["severity"] != "critical" {
		t.Errorf("alert labels %v: want severity critical", fired.Labels)
	}
	if writes.committed() == 0 {
		t.Error("no event was written")
	}

	// The keys waiting behind their failing events are blocked: the blocked-key alert fires too.
	waitFor(t, ctx, 2*time.Minute, "OutboxKeyBlocked to fire", func() (bool, string) {
		alerts, err := prom.Alerts(ctx)
		for _, a := range alerts {
			if a.Labels["alertname"] == "OutboxKeyBlocked" && a.Labels["table"] == name && a.State == "firing" {
				return true, ""
			}
		}
		blocked, _ := prom.Query(ctx, fmt.Sprintf("outboxkit_forwarder_blocked_keys{table=%q}", name))
		return false, fmt.Sprintf("alerts %v (%v), blocked keys %v", alerts, err, blocked)
	})
	logf("OutboxKeyBlocked firing %s after Kafka stopped", time.Since(stopped).Round(time.Second))

	checkDashboardQueries(t, ctx, prom, name)

	logf("killing the relay")
	relay.kill()
	waitFor(t, ctx, 2*time.Minute, "OutboxRelayDown to fire", func() (bool, string) {
		alerts, err := prom.Alerts(ctx)
		for _, a := range alerts {
			if a.Labels["alertname"] == "OutboxRelayDown" && a.Labels["instance"] == relayAddr && a.State == "firing" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("alerts %v (%v)", alerts, err)
	})
	logf("OutboxRelayDown firing")
}

// startPrometheus runs Prometheus on a test copy of the committed rules, scraping the relay
// every 2 s (rules evaluated every second) in job outboxkit-relay (the job the rules select), and stops it with the test.
func startPrometheus(t *testing.T, ctx context.Context, tool Promtool, bin, relayAddr string) *Server {
	t.Helper()
	dir := t.TempDir()
	committed, err := os.ReadFile(deployPath(t, "prometheus", "outboxkit-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := OverrideRules(committed, testOverrides)
	if err != nil {
		t.Fatal(err)
	}
	rulesPath := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(rulesPath, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tool.CheckRules(ctx, rulesPath); err != nil {
		t.Fatalf("test copy of the rules: %v", err)
	}
	config, err := yaml.Marshal(map[string]any{
		"global":     map[string]any{"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "1s"},
		"rule_files": []string{rulesPath},
		"scrape_configs": []any{map[string]any{
			"job_name":       "outboxkit-relay",
			"static_configs": []any{map[string]any{"targets": []string{relayAddr}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	prom, err := StartServer(startCtx, bin, dir, freeAddr(t), config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		prom.Stop()
		if t.Failed() {
			t.Logf("prometheus log (%s):\n%s", prom.LogPath, tail(prom.LogPath, 30))
		}
	})
	return prom
}

// checkDashboardQueries runs every query of the committed dashboard against prom, with the
// dashboard's variables set to this test's job and table: each must be valid PromQL, and each
// must return data, except the failure counters (they exist only once something failed) and the
// CDC row's queries (this relay runs the polling source, which exports no outboxkit_cdc_ metric;
// they are checked for valid PromQL only).
func checkDashboardQueries(t *testing.T, ctx context.Context, prom *Server, table string) {
	t.Helper()
	model, err := os.ReadFile(deployPath(t, "grafana", "dashboards", "outboxkit-relay.json"))
	if err != nil {
		t.Fatal(err)
	}
	queries, err := DashboardQueries(model)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"job": "outboxkit-relay", "table": table, "__rate_interval": "30s", "__range": "5m"}
	for _, q := range queries {
		expr := ExpandVariables(q.Expr, vars)
		if strings.Contains(expr, "$") {
			t.Errorf("panel %q query %s: unexpanded variable in %s", q.Panel, q.RefID, expr)
			continue
		}
		samples, err := prom.Query(ctx, expr)
		if err != nil {
			t.Errorf("panel %q query %s: %v", q.Panel, q.RefID, err)
			continue
		}
		mayBeEmpty := strings.Contains(expr, "failed_total") || strings.Contains(expr, "dead_lettered_total") ||
			strings.Contains(expr, "outboxkit_cdc_")
		if len(samples) == 0 && !mayBeEmpty {
			t.Errorf("panel %q query %s returned no data: %s", q.Panel, q.RefID, expr)
		}
	}
	t.Logf("%d dashboard queries ran against Prometheus", len(queries))
}

// writing writes one event every 50 ms until the test ends.
type writing struct {
	mu        sync.Mutex
	n, failed int
	lastErr   error
}

func (w *writing) status() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d committed, %d failed (last error: %v)", w.n, w.failed, w.lastErr)
}

func (w *writing) committed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// startWriting starts writing one event every 50 ms (over 10 aggregates) into table, until
// the test ends.
func startWriting(t *testing.T, db *sql.DB, table outbox.Table, topic string) *writing {
	t.Helper()
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table.Events()})
	if err != nil {
		t.Fatal(err)
	}
	w := &writing{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(50 * time.Millisecond)
		defer ticker.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			err := writeOne(ctx, db, writer, topic, fmt.Sprintf("order-%d", i%10), i)
			w.mu.Lock()
			if err != nil && ctx.Err() == nil {
				w.failed++
				w.lastErr = err
			} else if err == nil {
				w.n++
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return w
}

func writeOne(ctx context.Context, db *sql.DB, writer *outbox.Writer, topic, key string, seq int) error {
	event, err := outbox.NewJSONEvent(topic, "order", key, "OrderPlaced", map[string]int{"seq": seq})
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := writer.WriteTx(ctx, tx, event); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("write: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// waitFor polls cond every 500 ms until it holds; after timeout (or ctx's end) the test fails
// with what cond last reported.
func waitFor(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waited %s for %s: %s", timeout, what, detail)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
