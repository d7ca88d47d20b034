package relayconfig

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
)

// A bad value of each of the CLI's own variables is an error naming the variable.
func TestBadEnvValueNamesTheVariable(t *testing.T) {
	cases := []struct{ name, value string }{
		{EnvDatabaseDialect, "oracle"},
		{EnvDatabaseTable, "select"},
		{EnvDatabaseTable, "a-b"},
		{EnvDatabaseDSN, ""},
		{EnvForwarderDelivery, "twice"},
		{EnvForwarderSource, "binlog"},
		{"OUTBOXKIT_BROKER", "kafak"},
		{"OUTBOXKIT_KAFKA_TLS_ENABLED", "yes please"},
	}
	doc := base + "broker: kafka\nkafka:\n  brokers: [k:9092]\n"
	for _, c := range cases {
		_, err := Parse([]byte(doc), env(map[string]string{c.name: c.value}), Options{Broker: true})
		if err == nil {
			t.Errorf("%s=%q: accepted", c.name, c.value)
			continue
		}
		if !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s=%q: error does not name the variable: %v", c.name, c.value, err)
		}
	}
}

// AppliedEnv names the overrides in effect (the CLI's and, with Options.Broker, the broker
// part's), never their values; variables it does not read (the test services' names) are left out.
func TestAppliedEnv(t *testing.T) {
	lookup := env(map[string]string{
		EnvDatabaseDSN:                 "postgres://u:s3cret@h/db",
		EnvForwarderSource:             "polling",
		"OUTBOXKIT_KAFKA_BROKERS":      "k:9092",
		"OUTBOXKIT_ADMIN_WRITE_TOKENS": "ops:0123456789abcdef0123",
		"OUTBOXKIT_TEST_PG_DSN":        "postgres://x",
	})
	got := AppliedEnv(lookup, Options{Broker: true})
	want := []string{EnvDatabaseDSN, EnvForwarderSource, EnvAdminWriteTokens, "OUTBOXKIT_KAFKA_BROKERS"}
	if !slices.Equal(got, want) {
		t.Errorf("AppliedEnv = %v, want %v", got, want)
	}
	if got := AppliedEnv(lookup, Options{}); slices.Contains(got, "OUTBOXKIT_KAFKA_BROKERS") {
		t.Errorf("without the broker part AppliedEnv = %v, want no broker variable", got)
	}
}

// Every OUTBOXKIT_ variable docs/cli.md lists in its table is read by the CLI or brokerconfig.
func TestEveryCLIDocumentedEnvVarIsRead(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	read := append(EnvNames(), brokerconfig.EnvNames()...)
	rows := regexp.MustCompile("(?m)^\\| `(OUTBOXKIT_[A-Z0-9_]+)`(?:, `(OUTBOXKIT_[A-Z0-9_]+)`)? \\|").FindAllSubmatch(doc, -1)
	if len(rows) < 6 {
		t.Fatalf("found %d variable rows in docs/cli.md, want at least 6", len(rows))
	}
	for _, r := range rows {
		for _, name := range r[1:] {
			if len(name) > 0 && !slices.Contains(read, string(name)) {
				t.Errorf("docs/cli.md documents %s, which the CLI does not read", name)
			}
		}
	}
	for _, name := range EnvNames() {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s is not documented in docs/cli.md", name)
		}
	}
}
