package adminapi

import (
	"errors"
	"strings"
	"testing"
)

// ClientError removes addresses, connection settings, URL credentials and the configuration's
// secrets, and keeps the rest of the message.
func TestClientErrorScrubsAddressesAndCredentials(t *testing.T) {
	a := &API{cfg: Config{Scrub: func(s string) string { return strings.ReplaceAll(s, "sasl-Secret-77", "xxxxx") }}}
	for _, c := range []struct {
		err   string
		leaks []string
		keep  string
	}{
		{"failed to connect to `user=dbadmin database=orders`: 10.1.2.3:5432 (db.internal): dial error: dial tcp 10.1.2.3:5432: connect: connection refused",
			[]string{"dbadmin", "orders", "10.1.2.3", "5432", "db.internal"}, "connection refused"},
		{`parse "postgres://relay:pw-123456@db.internal:5432/app": invalid port`, []string{"pw-123456", "relay:", "db.internal"}, "invalid port"},
		{"dial tcp [fd00::12]:9092: i/o timeout", []string{"fd00::12", "9092"}, "i/o timeout"},
		{"dial tcp: lookup kafka-1.prod.example on 10.0.0.2:53: no such host", []string{"kafka-1.prod.example", "10.0.0.2"}, "no such host"},
		{"unable to dial kafka-2.prod.example:9093: EOF", []string{"kafka-2.prod.example", "9093"}, "EOF"},
		{"host=db.internal port=5432 password='a b c' sslmode=require: refused", []string{"db.internal", "5432", "a b c"}, "sslmode=require"},
		{"SASL authentication failed with sasl-Secret-77", []string{"sasl-Secret-77"}, "SASL authentication failed"},
		{`relation "outbox_events" does not exist (SQLSTATE 42P01)`, nil, `relation "outbox_events" does not exist (SQLSTATE 42P01)`},
	} {
		got := a.ClientError(errors.New(c.err))
		for _, leak := range c.leaks {
			if strings.Contains(got, leak) {
				t.Errorf("%q: %q still holds %q", c.err, got, leak)
			}
		}
		if !strings.Contains(got, c.keep) {
			t.Errorf("%q: %q lost %q", c.err, got, c.keep)
		}
	}
}
