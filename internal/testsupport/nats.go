package testsupport

import (
	"net"
	"net/url"
	"testing"
)

// EnvNATSURL is the environment variable naming the NATS server (JetStream on) started by
// scripts/services.sh; DefaultNATSURL is that script's default.
const (
	EnvNATSURL     = "OUTBOXKIT_TEST_NATS_URL"
	DefaultNATSURL = "nats://127.0.0.1:14222"
)

// NATSURL returns the URL of the test NATS server of scripts/services.sh after checking that
// it accepts connections. (Tests that need a server of their own, to stop or restart it, start
// one in-process with internal/testsupport/natsserver.)
func NATSURL(t testing.TB) string {
	t.Helper()
	raw := env(EnvNATSURL, DefaultNATSURL)
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("%s=%q is not a URL", EnvNATSURL, raw)
	}
	conn, err := net.DialTimeout("tcp", u.Host, probeTimeout)
	if err != nil {
		Unavailable(t, "NATS ("+EnvNATSURL+")", err)
		return raw
	}
	_ = conn.Close()
	return raw
}
