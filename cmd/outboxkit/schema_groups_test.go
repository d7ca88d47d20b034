package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/schema"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// A schema change that makes pending events invalid, end to end on the real services: events
// written while their subject's latest schema is version 1 wait; version 2 adds a field without
// a default; the relay (PostgreSQL, Kafka, the registry) encodes with the latest and
// dead-letters each event at once, and the admin API and `dead-letters groups --json` show them
// as one failure group naming the subject, version 2, the field path and the reason.
func TestSchemaChangeShowsAsAFailureGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	registryURL := testsupport.SchemaRegistryURL(t)
	db := testsupport.OpenPostgres(t)
	brokers := testsupport.KafkaBrokers(t)
	table, topic := testsupport.UniqueName("cli_schema_groups"), testsupport.UniqueName("cli.schema_groups")
	subject := schema.Subject(topic)
	dropTables(t, db, table)
	client, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		t.Fatal(err)
	}
	register := func(s string) {
		t.Helper()
		if _, err := client.CreateSchema(ctx, subject, sr.Schema{Type: sr.TypeAvro, Schema: s}); err != nil {
			t.Fatalf("register %s: %v", subject, err)
		}
	}
	register(`{"type":"record","name":"Order","fields":[{"name":"n","type":"long"}]}`)

	cfg := pgConfig(testsupport.PostgresDSN(t), table, fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\nschema_registry:\n  url: %s\n",
		strings.Join(brokers, ", "), registryURL))
	cfg = strings.Replace(cfg, "forwarder:\n", "forwarder:\n  max_attempts: 3\n  dead_letter_topic: "+topic+".dead\n", 1)
	cfg = strings.Replace(cfg, "  listen: 127.0.0.1:0\n", "  listen: 127.0.0.1:0\n  admin_read_tokens_file: read.tokens\n", 1)
	dir := writeConfig(t, cfg)
	if err := os.WriteFile(filepath.Join(dir, "read.tokens"), []byte("viewer:"+readToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := cli(t, dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	const pending = 3
	writeEvents(t, db, table, topic, pending) // {"n": i} on three keys: version 1's events
	register(`{"type":"record","name":"Order","fields":[{"name":"n","type":"long"},{"name":"currency","type":"string"}]}`)

	relay := startRelay(t, dir)
	r := &adminRelay{relay: relay, db: db, table: table, topic: topic, dir: dir}
	r.addr = relay.waitLog(t, "serving /metrics and /healthz")["addr"].(string)
	for count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE status = 2 AND attempts = 1") != pending {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d events dead-lettered at their first attempt; relay log:\n%s",
				count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE status = 2"), pending, relay.log())
		}
		time.Sleep(100 * time.Millisecond)
	}

	want := adminapi.SchemaFailureView{Subject: subject, Version: 2, Path: "$.currency"}
	check := func(source string, groups []adminapi.GroupView) {
		t.Helper()
		if len(groups) != 1 || groups[0].Schema == nil || groups[0].DeadLetters != pending {
			t.Fatalf("%s: %+v, want one schema group of %d dead letters", source, groups, pending)
		}
		got := *groups[0].Schema
		if got.Subject != want.Subject || got.Version != want.Version || got.Path != want.Path || got.Reason == "" {
			t.Fatalf("%s: schema %+v, want subject %s version %d path %s and a reason", source, got, want.Subject, want.Version, want.Path)
		}
		if len(groups[0].Topics) != 1 || groups[0].Topics[0] != topic {
			t.Errorf("%s: topics %v, want [%s]", source, groups[0].Topics, topic)
		}
	}
	var api []adminapi.GroupView
	if code := r.call(t, "GET", "/api/v1/groups", readToken, nil, &api); code != 200 {
		t.Fatalf("GET /api/v1/groups: %d", code)
	}
	check("GET /api/v1/groups", api)
	var cliGroups []adminapi.GroupView
	decodeCLI(t, cli(t, dir, "dead-letters", "groups", "--json"), &cliGroups)
	check("dead-letters groups --json", cliGroups)
	if cliGroups[0].Fingerprint != api[0].Fingerprint {
		t.Errorf("the CLI's group %s is not the API's %s", cliGroups[0].Fingerprint, api[0].Fingerprint)
	}
	t.Logf("group: %s: %+v", api[0].Normalised, *api[0].Schema)
}
