package main

import (
	"strings"
	"testing"
)

// A data source name the dialect's driver cannot parse is a configuration error (exit 2) naming
// database.dsn, with the password redacted, not a runtime "unreachable" (exit 1).
func TestUnparsableDSNIsAConfigurationError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ dialect, dsn string }{
		{"postgres", "mysql://app:s3cret-pw@db:3306/app"},
		{"postgres", "postgres://app:s3cret-pw@db:notaport/app"},
		{"mysql", "postgres://app:s3cret-pw@db:5432/app"},
	} {
		dir := writeConfig(t, "database:\n  dialect: "+c.dialect+"\n  dsn: "+c.dsn+"\nbroker: kafka\nkafka:\n  brokers: [127.0.0.1:1]\n")
		for _, args := range [][]string{{"status"}, {"migrate"}, {"relay"}} {
			res := cli(t, dir, args...)
			if res.code != 2 || !strings.Contains(res.stderr, "database.dsn") || strings.Contains(res.stdout+res.stderr, "s3cret-pw") {
				t.Errorf("%s with %s dsn %q: %s; want exit 2 naming database.dsn without the password", args[0], c.dialect, c.dsn, res)
			}
		}
	}
}
