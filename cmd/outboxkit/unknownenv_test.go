package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// unknownEnvWarning is the relay's warning about a set OUTBOXKIT_* variable it does not read.
const unknownEnvWarning = "unknown OUTBOXKIT_* environment variable, ignored"

// `outboxkit relay` started with OUTBOXKIT_* variables it does not read (a name the test scripts
// once exported beside the relay's own, a typo) warns at start about each, naming the nearest
// variable it reads; its own variables and the test scripts' OUTBOXKIT_TEST_* get no warning.
func TestRelayWarnsAboutUnknownEnv(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_unknownenv")
	dropTables(t, db, table)
	brokers := strings.Join(testsupport.KafkaBrokers(t), ",")
	dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, "broker: kafka\nkafka:\n  brokers: [127.0.0.1:1]\n"))
	p := startRelayWithEnv(t, dir, []string{
		"OUTBOXKIT_NATS_URL=nats://127.0.0.1:4222",
		"OUTBOXKIT_RABBITMQ_URL=amqp://guest:s3cret@127.0.0.1/",
		"OUTBOXKIT_DATABASE_DNS=postgres://nowhere",
		"OUTBOXKIT_KAFKA_BROKERS=" + brokers,
		"OUTBOXKIT_TEST_PG_DSN=postgres://test",
	}, "--migrate")
	p.waitLog(t, "forwarder started")
	var got [][2]string
	sc := bufio.NewScanner(strings.NewReader(p.log()))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == unknownEnvWarning {
			name, _ := rec["variable"].(string)
			nearest, _ := rec["did_you_mean"].(string)
			got = append(got, [2]string{name, nearest})
		}
	}
	want := [][2]string{
		{"OUTBOXKIT_NATS_URL", "OUTBOXKIT_NATS_URLS"},
		{"OUTBOXKIT_RABBITMQ_URL", "OUTBOXKIT_RABBITMQ_AMQP_URL"},
		{"OUTBOXKIT_DATABASE_DNS", "OUTBOXKIT_DATABASE_DSN"},
	}
	slices.SortFunc(got, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	slices.SortFunc(want, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	if !slices.Equal(got, want) {
		t.Errorf("warnings %q about unknown variables, want %q; log:\n%s", got, want, p.log())
	}
	if strings.Contains(p.log(), "s3cret") {
		t.Errorf("the relay logged the value of an unknown variable:\n%s", p.log())
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("relay exited with %d, want 0", code)
	}
}

// `scripts/services.sh env` exports, in the relay's namespace, only names the relay reads (with
// the relay's meaning) and the test scripts' own OUTBOXKIT_TEST_* names: a test variable named
// like a relay variable, such as OUTBOXKIT_NATS_URL beside the relay's OUTBOXKIT_NATS_URLS,
// teaches a user a name the relay ignores.
func TestServicesEnvExportsNoUnknownRelayVariable(t *testing.T) {
	out, err := exec.Command("bash", "../../scripts/services.sh", "env").Output()
	if err != nil {
		t.Fatalf("scripts/services.sh env: %v", err)
	}
	known := append(relayconfig.EnvNames(), brokerconfig.EnvNames()...)
	exported := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, _, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if !ok || !strings.HasPrefix(name, "OUTBOXKIT_") {
			continue
		}
		exported++
		if !strings.HasPrefix(name, "OUTBOXKIT_TEST_") && !slices.Contains(known, name) {
			t.Errorf("scripts/services.sh env exports %s: in the relay's namespace, but the relay does not read it (name test variables OUTBOXKIT_TEST_*)", name)
		}
	}
	if exported == 0 {
		t.Fatalf("scripts/services.sh env exported no OUTBOXKIT_* variable:\n%s", out)
	}
}
