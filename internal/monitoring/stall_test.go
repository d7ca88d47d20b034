package monitoring

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The dedicated Kafka of the stall test: other ports and state than the shared services,
// internal/faultinject's brokers and TestBacklogAlertFiresWhenTheBrokerStops' Kafka.
const (
	stallKafkaStateDir       = "/var/tmp/outboxkit-monitoring-stall"
	stallKafkaPort           = 29492
	stallKafkaControllerPort = 29493
	stallAfter               = 5 * time.Second
)

// TestPublishStallWarnsWhenTheBrokerStops runs `outboxkit relay` (publish_stall_after 5s) from a
// PostgreSQL outbox to a dedicated Kafka while events keep being written. While Kafka runs,
// outboxkit_forwarder_publish_stalled is 0 and nothing warns. Once Kafka is stopped, the relay
// must log the warn line "publishing makes no progress" (saying it has failed for at least
// publish_stall_after) and set the gauge to 1; once Kafka is back, log "publishing recovered" at
// info and set it to 0. Deadlines are generous: the states are asserted, not the speed.
func TestPublishStallWarnsWhenTheBrokerStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	run := setUpBrokerStop(t, ctx, stallKafkaStateDir, stallKafkaPort, stallKafkaControllerPort, "stall", t.Logf)
	name, broker := run.name, run.broker
	relayAddr := freeAddr(t)
	relay := startRelay(t, ctx, run.bin, run.dir, relayAddr, run.relayConfig(relayAddr, map[string]any{
		"unlimited_retries": true, "initial_interval": "100ms", "max_interval": "1s",
		"max_poll_interval": "500ms", "publish_stall_after": stallAfter.String(), "relay_id": "stall-test"}))
	writes := startWriting(t, run.db, run.table, run.topic)

	stalled := func() (float64, string) { return metric(ctx, relayAddr, "outboxkit_forwarder_publish_stalled", name) }
	waitFor(t, ctx, 2*time.Minute, "relayed events with Kafka running", func() (bool, string) {
		n, detail := metric(ctx, relayAddr, "outboxkit_forwarder_relayed_total", name)
		return n > 0, fmt.Sprintf("relayed %v (%s); writes: %s", n, detail, writes.status())
	})
	if v, detail := stalled(); v != 0 {
		t.Fatalf("publish_stalled with Kafka running: %v (%s)", v, detail)
	}

	// Checked before the stop begins: a stop that takes longer than publish_stall_after (a
	// loaded machine, Kafka's controlled shutdown) makes a warning during the stop correct.
	if logText(t, relay.logPath, "publishing makes no progress") != "" {
		t.Fatalf("the relay warned of a stall while Kafka ran:\n%s", tail(relay.logPath, 40))
	}
	if err := broker.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log("Kafka stopped; writes go on")
	var warn string
	waitFor(t, ctx, 3*time.Minute, "the stall warning and publish_stalled 1", func() (bool, string) {
		warn = logText(t, relay.logPath, "publishing makes no progress")
		v, detail := stalled()
		return warn != "" && v == 1, fmt.Sprintf("warn line %q, publish_stalled %v (%s)", warn, v, detail)
	})
	t.Logf("warned: %s", warn)
	if !strings.Contains(warn, "level=WARN") {
		t.Errorf("the stall line is not at warn level: %s", warn)
	}
	m := regexp.MustCompile(` for=(\S+)`).FindStringSubmatch(warn)
	if m == nil {
		t.Fatalf("the stall line does not say for how long: %s", warn)
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d < stallAfter-time.Second { // rounded to seconds
		t.Errorf("the relay warned after %s of failures, before publish_stall_after %s: %s", m[1], stallAfter, warn)
	}
	if !strings.Contains(warn, "last_error=") {
		t.Errorf("the stall line has no last error: %s", warn)
	}

	if err := broker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log("Kafka started again")
	var recovered string
	waitFor(t, ctx, 3*time.Minute, "the recovery line and publish_stalled 0", func() (bool, string) {
		recovered = logText(t, relay.logPath, "publishing recovered")
		v, detail := stalled()
		return recovered != "" && v == 0, fmt.Sprintf("recovery line %q, publish_stalled %v (%s)", recovered, v, detail)
	})
	t.Logf("recovered: %s", recovered)
	if !strings.Contains(recovered, "level=INFO") {
		t.Errorf("the recovery line is not at info level: %s", recovered)
	}
	if n := strings.Count(readFile(t, relay.logPath), "publishing makes no progress"); n != 1 {
		t.Errorf("%d stall warnings for one outage, want 1", n)
	}
}

// metric returns the value of the series name{table="table"} on the relay's /metrics, and what
// it found otherwise.
func metric(ctx context.Context, addr, name, table string) (float64, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return -1, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1, err.Error()
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sum, found := 0.0, false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `table="`+table+`"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum, found = sum+v, true
		}
	}
	if !found {
		return -1, fmt.Sprintf("no %s series for table %s", name, table)
	}
	return sum, ""
}

// logText returns the first line of the log at path that contains msg, or "".
func logText(t *testing.T, path, msg string) string {
	for _, l := range strings.Split(readFile(t, path), "\n") {
		if strings.Contains(l, msg) {
			return l
		}
	}
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
