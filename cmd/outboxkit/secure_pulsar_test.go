package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/securepulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The tests of this file run `outboxkit relay` against the Pulsar standalone with TLS, token
// authentication and authorization of scripts/services.sh start-pulsar-secure. The token
// reaches the relay through OUTBOXKIT_PULSAR_AUTH_TOKEN or a token file, never the YAML file.

// securePulsarYAML is the broker part for the secure Pulsar in namespace ns, trusting caFile,
// at url; tokenFile, if not "", is the auth_token_file.
func securePulsarYAML(url, caFile, ns, tokenFile string) string {
	tenant, namespace, _ := strings.Cut(ns, "/")
	y := fmt.Sprintf("broker: pulsar\npulsar:\n  url: %s\n  tls_trust_certs_file: %s\n  tls_validate_hostname: true\n"+
		"  tenant: %s\n  namespace: %s\n  operation_timeout: 4s\n  connection_timeout: 2s\n", url, caFile, tenant, namespace)
	if tokenFile != "" {
		y += "  auth_token_file: " + tokenFile + "\n"
	}
	return y
}

func tokenEnv(token string) string { return "OUTBOXKIT_PULSAR_AUTH_TOKEN=" + token }

// Wrong token (signed with another key), expired token, untrusted certificate, plaintext URL
// against the TLS port: `outboxkit relay` exits 1 with an error naming the broker's address,
// the mechanisms and the cause; nothing it printed (debug log included) holds a token or the
// key, and the outbox keeps every event pending (none deleted, none dead-lettered).
func TestRelaySecurePulsarRefusesBadCredentials(t *testing.T) {
	b := securepulsar.Start(t)
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_psecure_bad")
	dropTables(t, db, table)
	right := b.Token(t, securepulsar.RelayRole, 0)
	wrong, err := securepulsar.SignToken([]byte("not-the-broker-key-0123456789abcdef"), securepulsar.RelayRole, 0)
	if err != nil {
		t.Fatal(err)
	}
	expired := b.Token(t, securepulsar.RelayRole, -time.Minute)
	never := b.Secrets(t, right, wrong, expired)
	plaintext := "pulsar://" + b.Addr()
	cases := []struct {
		name, url, token, caFile string
		want                     []string
	}{
		{"wrong token", b.URL, wrong, b.CAFile, []string{"Failed to authenticate", "refused the token"}},
		{"expired token", b.URL, expired, b.CAFile, []string{"Failed to authenticate", "it expired at"}},
		{"untrusted certificate", b.URL, right, b.UntrustedCAFile, []string{"x509: certificate signed by unknown authority"}},
		{"plaintext against the TLS port", plaintext, right, b.CAFile, []string{"no TLS", "use pulsar+ssl://"}},
	}
	if res := cli(t, writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, "")), "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	ids := writeEvents(t, db, table, testsupport.UniqueName("cli"), 5)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conf := pgConfig(testsupport.PostgresDSN(t), table, securePulsarYAML(tc.url, tc.caFile, securepulsar.GrantedNamespace, ""))
			dir := writeConfig(t, strings.Replace(conf, "level: info", "level: debug", 1))
			res := runRelayWithEnv(t, dir, []string{tokenEnv(tc.token)})
			checkRefusedAtStart(t, db, table, len(ids), res,
				append([]string{"outboxkit: relay: broker pulsar:", b.Addr(), "token authentication", "TLS"}, tc.want...), never)
		})
	}
}

// A role without produce permission on the topic: the relay (role relay, namespace
// secure/refused where it may produce only on the topics granted to it one by one, its token
// in a file) keeps running, the refused topic's events wait (pending in `outboxkit status`,
// failed_total and pending_rows in /metrics, nothing dead-lettered) while a granted topic
// flows; once produce is granted on the topic through the admin REST API, they flow too, and a
// consumer over TLS reads them.
func TestRelaySecurePulsarWaitsForPermission(t *testing.T) {
	b := securepulsar.Start(t)
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_psecure_acl")
	dropTables(t, db, table)
	ns := securepulsar.RefusedNamespace
	granted, refused := testsupport.UniqueName("granted"), testsupport.UniqueName("refused")
	dlq := granted + "-dlq"
	b.GrantProduce(t, ns, dlq)
	b.GrantProduce(t, ns, granted)
	token := b.Token(t, securepulsar.RelayRole, 0)
	tokenFile := filepath.Join(t.TempDir(), "relay.token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := strings.Replace(pgConfig(testsupport.PostgresDSN(t), table, securePulsarYAML(b.URL, b.CAFile, ns, tokenFile)),
		"forwarder:\n", "forwarder:\n  unlimited_retries: true\n  max_interval: 1s\n  dead_letter_topic: "+dlq+"\n", 1)
	dir := writeConfig(t, conf)
	if res := cli(t, dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	// Both topics' events share their keys (order-0..2): the granted ones come first in each
	// key, since a refused event delays the later events of its own key (park, don't block).
	grantedIDs := writeEvents(t, db, table, granted, 3)
	refusedIDs := writeEvents(t, db, table, refused, 4)

	p := startRelayWithEnv(t, dir, nil)
	httpAddr := p.waitLog(t, "serving /metrics and /healthz")["addr"].(string)
	securePulsarConsume(t, b, ns, granted, grantedIDs)

	failed := metricPrefix("outboxkit_forwarder_failed_total", table, refused)
	pending := fmt.Sprintf(`outboxkit_forwarder_pending_rows{table=%q,tenant=""}`, table)
	waitMetric(t, httpAddr, failed, func(v float64) bool { return v >= 2 })
	waitMetric(t, httpAddr, pending, func(v float64) bool { return v == float64(len(refusedIDs)) })
	var lastError string
	if err := db.QueryRow("SELECT COALESCE(MAX(last_error), '') FROM "+table+" WHERE topic = $1", refused).Scan(&lastError); err != nil {
		t.Fatal(err)
	}
	t.Logf("last_error of a refused event: %s", lastError)
	if !strings.Contains(lastError, "AuthorizationError") || !strings.Contains(lastError, b.Addr()) {
		t.Errorf("last_error %q does not name the broker's AuthorizationError and address", lastError)
	}
	res := cli(t, dir, "status")
	t.Logf("status while refused:\n%s", res.stdout)
	if fields := strings.Fields(grepLines(res.stdout, refused)); res.code != 0 || len(fields) != 6 ||
		fields[1] != strconv.Itoa(len(refusedIDs)) || fields[3] != "0" || fields[4] != "0" {
		t.Errorf("status row of the refused topic = %q, want %s %d <n> 0 0 <age>:\n%s", fields, refused, len(refusedIDs), res)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE status = 2"); n != 0 {
		t.Errorf("%d events dead-lettered", n)
	}

	b.GrantProduce(t, ns, refused)
	securePulsarConsume(t, b, ns, refused, refusedIDs)
	relayed := metricPrefix("outboxkit_forwarder_relayed_total", table, refused)
	waitMetric(t, httpAddr, relayed, func(v float64) bool { return v == float64(len(refusedIDs)) })
	if code := p.stop(t); code != 0 {
		t.Errorf("relay exited with %d after SIGTERM, want 0", code)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table); n != 0 {
		t.Errorf("%d rows left in the outbox", n)
	}
	for _, secret := range b.Secrets(t, token) {
		if strings.Contains(p.log(), secret) {
			t.Errorf("the relay's log shows the token or the secret key")
		}
	}
}

// securePulsarConsume reads topic of namespace ns over TLS as the consumer role until every id
// was seen.
func securePulsarConsume(t *testing.T, b securepulsar.Broker, ns, topic string, ids []uuid.UUID) {
	t.Helper()
	sub, err := pulsar.NewSubscriber(pulsar.SubscriberConfig{
		Config:           b.Config(t, securepulsar.ConsumerRole, ns),
		SubscriptionName: testsupport.UniqueName("cli-secure"),
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id.String()] = true
	}
	for len(want) > 0 {
		select {
		case msg := <-msgs:
			delete(want, msg.Metadata.Get(outbox.MetadataEventID))
			msg.Ack()
		case <-ctx.Done():
			t.Fatalf("%d events never reached topic %s over TLS", len(want), topic)
		}
	}
}
