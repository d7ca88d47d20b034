package schema

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "outboxkit test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, dir: t.TempDir()}
	ca.write(t, "ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *testCA) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue returns a certificate for 127.0.0.1 (server or client) and writes it and its key.
func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	ca.write(t, name+".pem", "CERTIFICATE", der)
	ca.write(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
	return cert
}

// TestRegistryOverMutualTLS: the test registry behind a TLS endpoint that requires a client
// certificate (a reverse proxy in the test; the registry itself is the real one). With the CA and
// a client certificate the encoder looks the schema up; without the client certificate, or
// without the CA, the lookup fails as a retriable *RegistryError naming the TLS failure.
func TestRegistryOverMutualTLS(t *testing.T) {
	_, _, topic, id := registry(t)
	target, err := url.Parse(testsupport.SchemaRegistryURL(t))
	if err != nil {
		t.Fatal(err)
	}
	ca := newTestCA(t)
	serverCert := ca.issue(t, "server", x509.ExtKeyUsageServerAuth)
	ca.issue(t, "client", x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)

	file := func(name string) string { return filepath.Join(ca.dir, name) }
	for _, tc := range []struct {
		name string
		tls  RegistryTLS
		want string // "" for success, else a part of the error
	}{
		{"CA and client certificate", RegistryTLS{CAFile: file("ca.pem"), CertFile: file("client.pem"), KeyFile: file("client-key.pem")}, ""},
		{"no client certificate", RegistryTLS{CAFile: file("ca.pem")}, "certificate required"},
		{"no CA", RegistryTLS{CertFile: file("client.pem"), KeyFile: file("client-key.pem")}, "certificate signed by unknown authority"},
	} {
		enc, err := NewEncoderFromConfig(RegistryConfig{URL: srv.URL, TLS: tc.tls})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		out, err := enc.Encode(context.Background(), topic, []byte(validOrder("tls")))
		var regErr *RegistryError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && (len(out) < 5 || int(out[1])<<24|int(out[2])<<16|int(out[3])<<8|int(out[4]) != id):
			t.Errorf("%s: framed % x, want schema id %d", tc.name, out, id)
		case tc.want != "" && (!errors.As(err, &regErr) || !Retriable(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want a retriable *RegistryError with %q", tc.name, err, tc.want)
		}
	}
}

// Bad TLS settings are refused with the key and the value.
func TestRegistryTLSConfigErrorsNameTheValue(t *testing.T) {
	ca := newTestCA(t)
	for _, tc := range []struct {
		cfg  RegistryConfig
		want string
	}{
		{RegistryConfig{URL: "http://r", TLS: RegistryTLS{InsecureSkipVerify: true}}, `tls.insecure_skip_verify: set, but url "http://r" is not https`},
		{RegistryConfig{URL: "https://r", TLS: RegistryTLS{CertFile: "c.pem"}}, `tls.cert_file "c.pem" and tls.key_file "" must be set together`},
		{RegistryConfig{URL: "https://r", TLS: RegistryTLS{CAFile: "/nonexistent/ca.pem"}}, `tls.ca_file: "/nonexistent/ca.pem" is not readable: stat /nonexistent/ca.pem: no such file or directory`},
	} {
		if err := tc.cfg.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.cfg.TLS, err, tc.want)
		}
	}
	notPEM := ca.write(t, "not.pem", "NOTHING", nil)
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewEncoderFromConfig(RegistryConfig{URL: "https://r", TLS: RegistryTLS{CAFile: notPEM}})
	if err == nil || err.Error() != `schema_registry.tls.ca_file: "`+notPEM+`" holds no PEM certificate` {
		t.Errorf("CA file without a certificate: %v", err)
	}
}
