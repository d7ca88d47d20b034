// Package securepulsar starts, for the tests that need it, the Pulsar standalone with TLS,
// token authentication and authorization of scripts/services.sh (start-pulsar-secure,
// idempotent), and gives them its addresses and certificate files, tokens signed at test time
// with its secret key, and its admin REST API as the super user. A broker that cannot be
// started fails the test with CI=true and skips it elsewhere (testsupport.Unavailable).
package securepulsar

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/servicescript"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// Environment variables printed by `scripts/services.sh env`, with the script's defaults.
const (
	EnvURL             = "OUTBOXKIT_TEST_PULSAR_SECURE_URL"
	EnvHTTPS           = "OUTBOXKIT_TEST_PULSAR_SECURE_HTTPS"
	EnvCAFile          = "OUTBOXKIT_TEST_PULSAR_SECURE_CA_FILE"
	EnvUntrustedCAFile = "OUTBOXKIT_TEST_PULSAR_SECURE_UNTRUSTED_CA_FILE"
	EnvSecretKeyFile   = "OUTBOXKIT_TEST_PULSAR_SECURE_SECRET_KEY_FILE"

	DefaultURL           = "pulsar+ssl://127.0.0.1:6651"
	DefaultHTTPS         = "https://127.0.0.1:8443"
	DefaultDir           = "/var/tmp/outboxkit-services/pulsar-secure"
	DefaultCAFile        = DefaultDir + "/tls/ca.pem"
	DefaultUntrusted     = DefaultDir + "/tls/untrusted-ca.pem"
	DefaultSecretKeyFile = DefaultDir + "/secrets/token-secret.key"
)

// The roles (a token's subject) of scripts/services/pulsar-secure.sh and what they may do.
const (
	// AdminRole is the super user.
	AdminRole = "admin"
	// RelayRole may produce on GrantedNamespace only.
	RelayRole = "relay"
	// ConsumerRole may consume on GrantedNamespace and RefusedNamespace.
	ConsumerRole     = "consumer"
	GrantedNamespace = "secure/granted"
	RefusedNamespace = "secure/refused"
)

// Broker is the running secure broker.
type Broker struct {
	// URL is the TLS service URL (pulsar+ssl://host:port).
	URL string
	// HTTPS is the base URL of the admin REST API over TLS.
	HTTPS string
	// CAFile is the PEM file of the CA that signed the broker's certificate.
	CAFile string
	// UntrustedCAFile is the PEM file of a CA that signed nothing the broker presents.
	UntrustedCAFile string
	// SecretKeyFile holds the HS256 key the broker validates tokens with.
	SecretKeyFile string
	script        servicescript.Script
}

// Start starts the secure broker through scripts/services.sh (a no-op when it runs) and
// returns it.
func Start(t testing.TB) Broker {
	t.Helper()
	script, err := servicescript.Find()
	if err != nil {
		t.Fatal(err)
	}
	b := Broker{
		URL:             servicescript.Env(EnvURL, DefaultURL),
		HTTPS:           servicescript.Env(EnvHTTPS, DefaultHTTPS),
		CAFile:          servicescript.Env(EnvCAFile, DefaultCAFile),
		UntrustedCAFile: servicescript.Env(EnvUntrustedCAFile, DefaultUntrusted),
		SecretKeyFile:   servicescript.Env(EnvSecretKeyFile, DefaultSecretKeyFile),
		script:          script,
	}
	if err := script.Run(context.Background(), "start-pulsar-secure"); err != nil {
		testsupport.Unavailable(t, "the secure Pulsar broker (scripts/services.sh start-pulsar-secure)", err)
	}
	return b
}

// Instance is a secure broker of its own, apart from the shared one: its state directory and
// ports. Use one for a test that stops or restarts the broker.
type Instance struct {
	Dir                                            string
	TLSPort, HTTPSPort, Port, HTTPPort, BookiePort int
}

// StartInstance starts the secure broker inst (a no-op when it runs) and returns it. Stop it
// with Script("stop-pulsar-secure").
func StartInstance(t testing.TB, inst Instance) Broker {
	t.Helper()
	script, err := servicescript.Find(
		"PULSAR_SECURE_DIR="+inst.Dir,
		"SERVICES_LOG_DIR="+filepath.Join(inst.Dir, "logs"),
		fmt.Sprintf("PULSAR_SECURE_TLS_PORT=%d", inst.TLSPort),
		fmt.Sprintf("PULSAR_SECURE_HTTPS_PORT=%d", inst.HTTPSPort),
		fmt.Sprintf("PULSAR_SECURE_PORT=%d", inst.Port),
		fmt.Sprintf("PULSAR_SECURE_HTTP_PORT=%d", inst.HTTPPort),
		fmt.Sprintf("PULSAR_SECURE_BOOKIE_PORT=%d", inst.BookiePort),
	)
	if err != nil {
		t.Fatal(err)
	}
	b := Broker{
		URL:             fmt.Sprintf("pulsar+ssl://127.0.0.1:%d", inst.TLSPort),
		HTTPS:           fmt.Sprintf("https://127.0.0.1:%d", inst.HTTPSPort),
		CAFile:          filepath.Join(inst.Dir, "tls", "ca.pem"),
		UntrustedCAFile: filepath.Join(inst.Dir, "tls", "untrusted-ca.pem"),
		SecretKeyFile:   filepath.Join(inst.Dir, "secrets", "token-secret.key"),
		script:          script,
	}
	if err := os.MkdirAll(filepath.Join(inst.Dir, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := script.Run(context.Background(), "start-pulsar-secure"); err != nil {
		testsupport.Unavailable(t, "the secure Pulsar broker in "+inst.Dir+" (scripts/services.sh start-pulsar-secure)", err)
	}
	return b
}

// Script runs `scripts/services.sh sub` for this broker.
func (b Broker) Script(sub string) error { return b.script.Run(context.Background(), sub) }

// Addr is the host:port of the TLS service URL.
func (b Broker) Addr() string { return strings.TrimPrefix(b.URL, "pulsar+ssl://") }

// Token returns a token for role signed with the broker's key, expiring after ttl (never when
// ttl is 0; already expired when ttl is negative).
func (b Broker) Token(t testing.TB, role string, ttl time.Duration) string {
	t.Helper()
	key, err := os.ReadFile(b.SecretKeyFile)
	if err != nil {
		t.Fatalf("securepulsar: secret key: %v", err)
	}
	token, err := SignToken(key, role, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// SignToken returns an HS256 token for role (its subject) signed with key, expiring after ttl
// (never when ttl is 0).
func SignToken(key []byte, role string, ttl time.Duration) (string, error) {
	claims := jwt.MapClaims{"sub": role}
	if ttl != 0 {
		claims["exp"] = time.Now().Add(ttl).Unix()
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		return "", fmt.Errorf("securepulsar: sign a token for %s: %w", role, err)
	}
	return token, nil
}

// Secrets returns the strings a test must never find in what was printed: tokens and the
// broker's secret key (raw, hex, base64, base64url).
func (b Broker) Secrets(t testing.TB, tokens ...string) []string {
	t.Helper()
	key, err := os.ReadFile(b.SecretKeyFile)
	if err != nil {
		t.Fatalf("securepulsar: secret key: %v", err)
	}
	return append(tokens, string(key), hex.EncodeToString(key), base64.StdEncoding.EncodeToString(key),
		base64.RawURLEncoding.EncodeToString(key))
}

// Config returns a Pulsar configuration that reaches the broker over TLS (trusting its CA,
// checking its host name, the default) with a token of role, in namespace ns
// (GrantedNamespace or RefusedNamespace).
func (b Broker) Config(t testing.TB, role, ns string) pulsar.Config {
	t.Helper()
	tenant, namespace, _ := strings.Cut(ns, "/")
	return pulsar.Config{
		URL:               b.URL,
		AuthToken:         b.Token(t, role, 0),
		TLSTrustCertsFile: b.CAFile, // the host name is checked by default
		Tenant:            tenant,
		Namespace:         namespace,
		OperationTimeout:  10 * time.Second,
		ConnectionTimeout: 5 * time.Second,
	}
}

// GrantProduce lets the relay role produce on topic (a short name in RefusedNamespace or
// GrantedNamespace, or tenant/namespace/topic), through the admin REST API as the super user.
// The topic is created first: the broker refuses permissions on topics that do not exist.
func (b Broker) GrantProduce(t testing.TB, ns, topic string) {
	t.Helper()
	path := "/admin/v2/persistent/" + ns + "/" + topic
	if code, body := b.Admin(t, http.MethodPut, path, nil); code != http.StatusNoContent && code != http.StatusConflict {
		t.Fatalf("securepulsar: create topic %s/%s: HTTP %d: %s", ns, topic, code, body)
	}
	if code, body := b.Admin(t, http.MethodPost, path+"/permissions/"+RelayRole, []string{"produce"}); code != http.StatusNoContent {
		t.Fatalf("securepulsar: grant produce on %s/%s to %s: HTTP %d: %s", ns, topic, RelayRole, code, body)
	}
}

// Admin calls the admin REST API over TLS as the super user and returns the status code and body.
func (b Broker) Admin(t testing.TB, method, path string, body any) (int, string) {
	t.Helper()
	pem, err := os.ReadFile(b.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, b.HTTPS+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.Token(t, AdminRole, time.Hour))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("securepulsar: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// Command returns the command line that runs `scripts/services.sh sub` for this broker.
func (b Broker) Command(sub string) []string { return b.script.Command(sub) }
