package relayconfig

import (
	"slices"
	"testing"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
)

// Every set OUTBOXKIT_* variable the configuration does not read is reported with the nearest
// name it does read, among the loader's own names (the CLI's and the broker part's); the names it
// reads, the test scripts' OUTBOXKIT_TEST_* and other prefixes are not.
func TestUnknownEnv(t *testing.T) {
	environ := []string{
		"OUTBOXKIT_NATS_URL=nats://127.0.0.1:4222",
		"OUTBOXKIT_RABBITMQ_URL=amqp://guest:secret@127.0.0.1/",
		"OUTBOXKIT_DATABASE_DNS=postgres://x",
		"OUTBOXKIT_KAFKA_BROKERS=k:9092",
		"OUTBOXKIT_DATABASE_DSN=postgres://y",
		"OUTBOXKIT_ADMIN_READ_TOKENS=a:b",
		"OUTBOXKIT_TEST_PG_DSN=postgres://z",
		"OUTBOXKIT_KAFKA_BROKER=k:9092",
		"PATH=/usr/bin",
		"XOUTBOXKIT_NATS_URL=x",
	}
	got := UnknownEnv(environ)
	want := []UnknownVar{
		{"OUTBOXKIT_NATS_URL", "OUTBOXKIT_NATS_URLS"},
		{"OUTBOXKIT_RABBITMQ_URL", "OUTBOXKIT_RABBITMQ_AMQP_URL"},
		{"OUTBOXKIT_DATABASE_DNS", "OUTBOXKIT_DATABASE_DSN"},
		{"OUTBOXKIT_KAFKA_BROKER", "OUTBOXKIT_KAFKA_BROKERS"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("UnknownEnv = %v\nwant %v", got, want)
	}
	for _, name := range append(EnvNames(), brokerconfig.EnvNames()...) {
		if u := UnknownEnv([]string{name + "=1"}); len(u) != 0 {
			t.Errorf("%s, a variable the configuration reads, is reported unknown: %v", name, u)
		}
	}
}

func TestLevenshtein(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"", "ab", 2}, {"kitten", "sitting", 3}, {"URL", "URLS", 1}, {"DNS", "DSN", 2}} {
		if got := levenshtein(c.a, c.b); got != c.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
