package pulsar

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// pulsar-client-go retries a failed connection until OperationTimeout and then returns only
// "context deadline exceeded" / "connection error": the reason (the broker refused the token,
// the certificate is not trusted, the port speaks TLS) is only logged. connFailures keeps the
// last such reason the client logged, so errors can name it.
type connFailures struct {
	mu   sync.Mutex
	last string
}

// connFailurePrefixes are the starts of pulsar-client-go's log messages about a connection it
// could not establish (internal/connection.go).
var connFailurePrefixes = []string{
	"Failed to establish connection",
	"Failed to connect to broker",
	"Failed to perform initial handshake",
}

// observe records msg (and err) if it is a connection failure. Safe on a nil receiver.
func (f *connFailures) observe(msg string, err error) {
	if f == nil {
		return
	}
	for _, p := range connFailurePrefixes {
		if strings.HasPrefix(msg, p) {
			if err != nil {
				msg += ": " + err.Error()
			}
			f.mu.Lock()
			f.last = msg
			f.mu.Unlock()
			return
		}
	}
}

func (f *connFailures) lastFailure() string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// brokerError is an error of an operation on the broker, named with the broker's address and
// the security mechanisms in use, on one line.
type brokerError struct {
	msg    string
	err    error
	secret string // the token, removed from the text should anything echo it
}

func (e *brokerError) Error() string {
	s := e.msg + ": " + strings.ReplaceAll(e.err.Error(), "\n", "; ")
	if e.secret != "" {
		s = strings.ReplaceAll(s, e.secret, "[redacted]")
	}
	return s
}

func (e *brokerError) Unwrap() error { return e.err }

// brokerErr wraps err of op ("create producer for persistent://…") with the broker's address,
// the mechanisms (authentication, TLS) and, when the client gave up connecting, the last
// connection failure it logged with a hint at its cause. The token never appears in it.
func (c Config) brokerErr(op string, err error, failures *connFailures) error {
	msg := fmt.Sprintf("pulsar: %s at %s", op, c.describe())
	if last := failures.lastFailure(); last != "" && isConnectFailure(err) {
		msg += ": could not connect: " + last + c.hint(last)
	} else if strings.Contains(err.Error(), "AuthorizationError") {
		msg += ": not authorized (the token's role lacks the permission on this topic or namespace)"
	}
	return &brokerError{msg: msg, err: err, secret: c.AuthToken}
}

// isConnectFailure tells the client's give-up errors from the broker's own answers (an
// AuthorizationError, a topic that does not exist), which say what they are.
func isConnectFailure(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection error") || strings.Contains(s, "context deadline exceeded") ||
		strings.Contains(s, "connection closed")
}

// hint explains a connection failure in terms of the configuration.
func (c Config) hint(failure string) string {
	switch {
	case strings.Contains(failure, "Failed to authenticate"):
		if exp, ok := tokenExpiry(c.AuthToken); ok && exp.Before(time.Now()) {
			return fmt.Sprintf(" (the broker refused the token: it expired at %s)", exp.UTC().Format(time.RFC3339))
		}
		return " (the broker refused the token: expired, not signed with the key the broker trusts, or not a token)"
	case strings.Contains(failure, "x509"):
		if c.TLSTrustCertsFile != "" {
			return fmt.Sprintf(" (the broker's TLS certificate is not trusted by TLSTrustCertsFile %s, or does not match the host name)", c.TLSTrustCertsFile)
		}
		return " (the broker's TLS certificate is not trusted by the system's CAs; set TLSTrustCertsFile)"
	case strings.Contains(failure, "handshake") && !c.tls():
		return " (the broker closed the connection during the handshake: a pulsar:// URL against a TLS port? use pulsar+ssl://)"
	}
	return ""
}

// tls reports whether the URL asks for TLS.
func (c Config) tls() bool {
	return strings.HasPrefix(c.URL, "pulsar+ssl://") || strings.HasPrefix(c.URL, "https://")
}

// describe names the broker (the URL without credentials) and the mechanisms in use, without
// any secret: "pulsar+ssl://host:6651 (token authentication, TLS trusting ca.pem, hostname
// verification on)".
func (c Config) describe() string {
	addr := "the broker"
	if u, err := url.Parse(c.URL); err == nil {
		addr = u.Redacted()
	}
	var auth string
	switch {
	case c.AuthToken != "":
		auth = "token authentication"
	case c.AuthTokenFile != "":
		auth = "token authentication (token file " + c.AuthTokenFile + ")"
	case c.TLSCertFile != "":
		auth = "TLS client certificate authentication (" + c.TLSCertFile + ")"
	default:
		auth = "no authentication"
	}
	tls := "no TLS"
	if c.tls() {
		trust := "the system's CAs"
		if c.TLSTrustCertsFile != "" {
			trust = c.TLSTrustCertsFile
		}
		hostname := "on"
		if c.TLSSkipHostnameVerification {
			hostname = "off (TLSSkipHostnameVerification)"
		}
		tls = fmt.Sprintf("TLS trusting %s, hostname verification %s", trust, hostname)
		if c.TLSAllowInsecureConnection {
			tls = "TLS without certificate verification (TLSAllowInsecureConnection)"
		}
	}
	return fmt.Sprintf("%s (%s, %s)", addr, auth, tls)
}

// tokenExpiry reads the exp claim of a JWT without verifying it (the broker does), to tell an
// expired token from a wrong one in errors.
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	return time.Unix(int64(*claims.Exp), 0), true
}
