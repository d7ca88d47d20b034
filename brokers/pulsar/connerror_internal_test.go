package pulsar

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A hand-made HS256-shaped token (header {"alg":"HS256"}, payload {"sub":"relay","exp":1700000000}).
const expiredToken = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJyZWxheSIsImV4cCI6MTcwMDAwMDAwMH0.c2lnbmF0dXJl"

func TestDescribeNamesAddressAndMechanisms(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{URL: "pulsar+ssl://broker:6651", AuthToken: "x", TLSTrustCertsFile: "/ca.pem"},
			"pulsar+ssl://broker:6651 (token authentication, TLS trusting /ca.pem, hostname verification on)"},
		{Config{URL: "pulsar+ssl://broker:6651", AuthTokenFile: "/run/token"},
			"pulsar+ssl://broker:6651 (token authentication (token file /run/token), TLS trusting the system's CAs, hostname verification on)"},
		{Config{URL: "pulsar+ssl://broker:6651", TLSSkipHostnameVerification: true},
			"pulsar+ssl://broker:6651 (no authentication, TLS trusting the system's CAs, hostname verification off (TLSSkipHostnameVerification))"},
		{Config{URL: "pulsar://broker:6650"}, "pulsar://broker:6650 (no authentication, no TLS)"},
		{Config{URL: "https://u:secret@broker:8443", TLSAllowInsecureConnection: true},
			"https://u:xxxxx@broker:8443 (no authentication, TLS without certificate verification (TLSAllowInsecureConnection))"},
	}
	for _, tc := range cases {
		if got := tc.cfg.describe(); got != tc.want {
			t.Errorf("describe() = %q, want %q", got, tc.want)
		}
	}
}

func TestBrokerErrNamesTheLastConnectionFailure(t *testing.T) {
	f := &connFailures{}
	f.observe("Connected to broker", nil) // not a failure: ignored
	if f.lastFailure() != "" {
		t.Fatal("a success was recorded as a failure")
	}
	f.observe("Failed to establish connection with broker: 'Failed to authenticate'", nil)
	cfg := Config{URL: "pulsar+ssl://broker:6651", AuthToken: expiredToken}
	err := cfg.brokerErr("create producer for t", errors.Join(errors.New("context deadline exceeded"), errors.New("connection error")), f)
	msg := err.Error()
	for _, s := range []string{"pulsar: create producer for t at pulsar+ssl://broker:6651 (token authentication",
		"Failed to authenticate", "it expired at 2023-11-14T22:13:20Z", "context deadline exceeded; connection error"} {
		if !strings.Contains(msg, s) {
			t.Errorf("%q does not contain %q", msg, s)
		}
	}
	if strings.Contains(msg, "\n") || strings.Contains(msg, expiredToken) {
		t.Errorf("the error spans lines or shows the token: %q", msg)
	}

	// An answer of the broker is not blamed on an old connection failure.
	err = cfg.brokerErr("create producer for t", errors.New("AuthorizationError"), f)
	if msg := err.Error(); strings.Contains(msg, "could not connect") || !strings.Contains(msg, "not authorized") {
		t.Errorf("authorization error = %q", msg)
	}
	// A token echoed by the broker is redacted.
	f.observe("Failed to connect to broker", errors.New("bad token "+expiredToken))
	if msg := cfg.brokerErr("op", errors.New("connection error: "+expiredToken), f).Error(); strings.Contains(msg, expiredToken) {
		t.Errorf("the token is shown: %q", msg)
	}
}

func TestHints(t *testing.T) {
	plain := Config{URL: "pulsar://broker:6651"}
	if h := plain.hint("Failed to perform initial handshake: EOF"); !strings.Contains(h, "use pulsar+ssl://") {
		t.Errorf("plaintext hint = %q", h)
	}
	tls := Config{URL: "pulsar+ssl://broker:6651", TLSTrustCertsFile: "/ca.pem"}
	if h := tls.hint("Failed to connect to broker.: x509: certificate signed by unknown authority"); !strings.Contains(h, "/ca.pem") {
		t.Errorf("x509 hint = %q", h)
	}
	if _, ok := tokenExpiry("not-a-jwt"); ok {
		t.Error("tokenExpiry accepted a non-JWT")
	}
	if exp, ok := tokenExpiry(expiredToken); !ok || !exp.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("tokenExpiry = %v, %v", exp, ok)
	}
}
