package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/outboxkit/outboxkit/internal/securekafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The tests of this file run `outboxkit relay` against the SASL_SSL (SCRAM-SHA-512) broker with
// ACLs of scripts/services.sh start-kafka-secure. The SASL password reaches the relay through
// OUTBOXKIT_KAFKA_SASL_PASSWORD, never through the YAML file.

// secureKafkaYAML is the broker part for the secure broker as the relay user, trusting caFile
// (no tls section when caFile is "").
func secureKafkaYAML(b securekafka.Broker, caFile string) string {
	y := fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\n  sasl:\n    mechanism: %s\n    username: %s\n",
		b.Addr, securekafka.Mechanism, securekafka.RelayUser)
	if caFile != "" {
		y += fmt.Sprintf("  tls:\n    enabled: true\n    ca_file: %s\n", caFile)
	}
	return y
}

// passwordEnv is the environment entry that hands the relay its SASL password.
func passwordEnv(password string) string { return "OUTBOXKIT_KAFKA_SASL_PASSWORD=" + password }

// runRelayWithEnv runs `outboxkit relay` to completion with extra environment entries.
func runRelayWithEnv(t *testing.T, dir string, env []string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "relay")
	cmd.Dir = dir
	cmd.Env = cleanEnv(env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	if exit, ok := err.(*exec.ExitError); ok {
		res.code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("relay: %v", err)
	}
	return res
}

// errorLine returns the line of the relay's output that carries its final error.
func errorLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "outboxkit: ") {
			return l
		}
	}
	return ""
}

// Wrong password, untrusted certificate, plaintext against the TLS port: `outboxkit relay`
// exits 1 with an error naming the broker's address and the mechanism, nothing it printed holds
// a password, and the outbox keeps every event pending (none deleted, none dead-lettered).
func TestRelaySecureKafkaRefusesBadCredentials(t *testing.T) {
	b := securekafka.Start(t)
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_secure_bad")
	dropTables(t, db, table)
	right := b.Password(t, securekafka.RelayUser)
	const wrong = "wrong-relay-password-5c1e9"
	cases := []struct {
		name, password, caFile, want string
	}{
		{"wrong password", wrong, b.CAFile, "SASL_AUTHENTICATION_FAILED"},
		{"untrusted certificate", right, b.UntrustedCAFile, "x509"},
		{"plaintext against the TLS port", right, "", "speaking to a tls endpoint"},
	}
	if res := cli(t, writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, "")), "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	ids := writeEvents(t, db, table, testsupport.UniqueName(securekafka.GrantedPrefix+"cli"), 5)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, secureKafkaYAML(b, tc.caFile)))
			res := runRelayWithEnv(t, dir, []string{passwordEnv(tc.password)})
			checkRefusedAtStart(t, db, table, len(ids), res,
				[]string{"outboxkit: relay: broker kafka:", b.Addr, securekafka.Mechanism, tc.want}, []string{right, wrong})
		})
	}
}

// checkRefusedAtStart checks a relay run that a bad security setup stopped at start: exit code
// 1, an error line holding every string of want, none of never in anything it printed, and the
// n events of table still pending, none deleted or dead-lettered.
func checkRefusedAtStart(t *testing.T, db *sql.DB, table string, n int, res result, want, never []string) {
	t.Helper()
	line := errorLine(res.stderr)
	t.Logf("exit %d, error: %s", res.code, line)
	if res.code != 1 {
		t.Errorf("exit code %d, want 1:\n%s", res.code, res)
	}
	for _, s := range want {
		if !strings.Contains(line, s) {
			t.Errorf("the error line does not contain %q: %q", s, line)
		}
	}
	for _, secret := range never {
		if strings.Contains(res.stdout+res.stderr, secret) {
			t.Errorf("the relay printed a secret:\n%s", res)
		}
	}
	if got := count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE status = 0"); got != n {
		t.Errorf("%d pending rows, want %d", got, n)
	}
	if got := count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE status <> 0"); got != 0 {
		t.Errorf("%d rows dead-lettered or marked", got)
	}
}

// An ACL that refuses the topic: the relay keeps running, the refused topic's events wait
// (pending in `outboxkit status`, failed_total and pending_rows in /metrics, nothing
// dead-lettered) while another topic flows; once the ACL is granted with Kafka's AclCommand,
// they flow too, and a consumer over SASL_SSL reads them.
func TestRelaySecureKafkaWaitsForACL(t *testing.T) {
	b := securekafka.Start(t)
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_secure_acl")
	dropTables(t, db, table)
	granted := testsupport.UniqueName(securekafka.GrantedPrefix + "cli")
	refused := testsupport.UniqueName(securekafka.RefusedPrefix + "cli")
	password := b.Password(t, securekafka.RelayUser)
	conf := strings.Replace(pgConfig(testsupport.PostgresDSN(t), table, secureKafkaYAML(b, b.CAFile)),
		"forwarder:\n", "forwarder:\n  unlimited_retries: true\n  max_interval: 1s\n  dead_letter_topic: "+granted+"-dlq\n", 1)
	dir := writeConfig(t, conf)
	if strings.Contains(conf, password) {
		t.Fatal("the configuration file holds the password")
	}
	if res := cli(t, dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	// Both topics' events share their keys (order-0..2): the granted ones come first in each
	// key, since a refused event delays the later events of its own key (park, don't block).
	grantedIDs := writeEvents(t, db, table, granted, 3)
	refusedIDs := writeEvents(t, db, table, refused, 4)

	p := startRelayWithEnv(t, dir, []string{passwordEnv(password)})
	httpAddr := p.waitLog(t, "serving /metrics and /healthz")["addr"].(string)
	secureConsume(t, b, granted, grantedIDs)

	// The refused events fail (each failure counted) and stay pending. Bounded waits.
	failed := metricPrefix("outboxkit_forwarder_failed_total", table, refused)
	pending := fmt.Sprintf(`outboxkit_forwarder_pending_rows{table=%q,tenant=""}`, table)
	waitMetric(t, httpAddr, failed, func(v float64) bool { return v >= 2 })
	waitMetric(t, httpAddr, pending, func(v float64) bool { return v == float64(len(refusedIDs)) })
	// A refused event's last_error names the broker's refusal (some attempts may end with the
	// publish deadline instead, while franz-go waits for the topic's metadata): bounded poll.
	var lastError string
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(lastError, "TOPIC_AUTHORIZATION_FAILED"); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no refused event's last_error names TOPIC_AUTHORIZATION_FAILED")
		}
		if err := db.QueryRow("SELECT COALESCE(MAX(last_error), '') FROM "+table+
			" WHERE topic = $1 AND last_error LIKE '%TOPIC_AUTHORIZATION_FAILED%'", refused).Scan(&lastError); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("last_error of a refused event: %s", lastError)
	res := cli(t, dir, "status")
	t.Logf("status while refused:\n%s", res.stdout)
	if fields := strings.Fields(grepLines(res.stdout, refused)); res.code != 0 || len(fields) != 6 ||
		fields[1] != strconv.Itoa(len(refusedIDs)) || fields[3] != "0" || fields[4] != "0" {
		t.Errorf("status row of the refused topic = %q, want %s %d <n> 0 0 <age>:\n%s", fields, refused, len(refusedIDs), res)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE status = 2"); n != 0 {
		t.Errorf("%d events dead-lettered", n)
	}

	b.Grant(t, refused)
	secureConsume(t, b, refused, refusedIDs)
	relayed := metricPrefix("outboxkit_forwarder_relayed_total", table, refused)
	waitMetric(t, httpAddr, relayed, func(v float64) bool { return v == float64(len(refusedIDs)) })
	if code := p.stop(t); code != 0 {
		t.Errorf("relay exited with %d after SIGTERM, want 0", code)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table); n != 0 {
		t.Errorf("%d rows left in the outbox", n)
	}
	if strings.Contains(p.log(), password) {
		t.Errorf("the relay's log shows the SASL password")
	}
}

func metricPrefix(name, table, topic string) string {
	return fmt.Sprintf(`%s{table=%q,tenant="",topic=%q}`, name, table, topic)
}

// waitMetric scrapes /metrics until the sample named series satisfies ok (two minutes at most:
// a bound against hangs; the pending gauges refresh every 10 s).
func waitMetric(t *testing.T, httpAddr, series string, ok func(float64) bool) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		code, body := httpGet(t, "http://"+httpAddr+"/metrics")
		if code != http.StatusOK {
			continue
		}
		for _, l := range strings.Split(body, "\n") {
			if v, found := strings.CutPrefix(l, series+" "); found {
				last = l
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ok(f) {
					return
				}
			}
		}
	}
	t.Fatalf("/metrics never showed the wanted %s (last: %q)", series, last)
}

// secureConsume reads topic over SASL_SSL as the consumer user until every id was seen.
func secureConsume(t *testing.T, b securekafka.Broker, topic string, ids []uuid.UUID) {
	t.Helper()
	pem, err := os.ReadFile(b.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	auth := scram.Auth{User: securekafka.ConsumerUser, Pass: b.Password(t, securekafka.ConsumerUser)}
	client, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(auth.AsSha512Mechanism()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	want := map[string]bool{}
	for _, id := range ids {
		want[id.String()] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for len(want) > 0 {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d events never reached topic %s over SASL_SSL (fetch errors: %v)", len(want), topic, fetches.Errors())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == outbox.MetadataEventID {
					delete(want, string(h.Value))
				}
			}
		})
	}
}
