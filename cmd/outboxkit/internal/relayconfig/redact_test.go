package relayconfig

import (
	"testing"
)

func TestRedactDSN(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://relay:s3cret@db:5432/app?sslmode=disable", "postgres://relay:xxxxx@db:5432/app?sslmode=disable"},
		{"postgres://relay@db/app?password=s3cret&sslmode=disable", "postgres://relay@db/app?password=xxxxx&sslmode=disable"},
		{"postgres://db/app", "postgres://db/app"},
		{"host=db user=relay password=s3cret dbname=app", "host=db user=relay password=xxxxx dbname=app"},
		{"host=db password='s3 cret' dbname=app", "host=db password=xxxxx dbname=app"},
		{"relay:s3cret@tcp(db:3306)/app?parseTime=true", "relay:xxxxx@tcp(db:3306)/app?parseTime=true"},
		{"relay:p@ss@tcp(db:3306)/app", "relay:xxxxx@tcp(db:3306)/app"},
		{"relay@tcp(db:3306)/app", "relay@tcp(db:3306)/app"},
		{"/var/lib/outbox.db", "/var/lib/outbox.db"},
		{"file:outbox.db?_pragma=busy_timeout(5000)", "file:outbox.db?_pragma=busy_timeout(5000)"},
		{"postgres://u:%zz@h/db", "(unparsable DSN, hidden)"},
	}
	for _, tc := range cases {
		if got := RedactDSN(tc.in); got != tc.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestScrubber(t *testing.T) {
	cfg, err := Parse([]byte(`
database:
  dialect: postgres
  dsn: postgres://relay:s3cret-pw@db:5432/app
broker: kafka
kafka:
  brokers: [k:9092]
  sasl: {mechanism: PLAIN, username: relay, password: kafka-secret}
`), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	scrub := cfg.Scrubber()
	for in, want := range map[string]string{
		"cannot parse `postgres://relay:s3cret-pw@db:5432/app`": "cannot parse `postgres://relay:xxxxx@db:5432/app`",
		"dial postgres://other:pw2@h failed":                    "dial postgres://other:xxxxx@h failed",
		"auth failed for password=s3cret-pw":                    "auth failed for password=xxxxx",
		"sasl: kafka-secret rejected, s3cret-pw too":            "sasl: xxxxx rejected, xxxxx too",
		"relay relay connected to db":                           "relay relay connected to db",
	} {
		if got := scrub(in); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
	// A password equal to a public value (here the user name) is not replaced everywhere, only
	// in DSN-shaped text, so ordinary messages stay readable.
	cfg, err = Parse([]byte("database:\n  dialect: postgres\n  dsn: postgres://outboxkit:outboxkit@db/outboxkit\n"), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	scrub = cfg.Scrubber()
	if got := scrub("table outboxkit_events: postgres://outboxkit:outboxkit@db/outboxkit"); got != "table outboxkit_events: postgres://outboxkit:xxxxx@db/outboxkit" {
		t.Errorf("scrub with a password equal to the user name: %q", got)
	}
}
