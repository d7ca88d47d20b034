package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI is a certificate authority made for one test, with a server certificate for 127.0.0.1
// and a client certificate it signed; nothing of it is committed.
type testPKI struct {
	dir                  string
	caFile               string
	certFile, keyFile    string
	pool                 *x509.CertPool
	client, strangerCert tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	caKey, caCert, caDER := selfSigned(t, "outboxkit test CA")
	p.pool.AddCert(caCert)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", caDER)
	serverKey, serverDER := signed(t, caCert, caKey, "relay", x509.ExtKeyUsageServerAuth)
	p.certFile = p.write(t, "server.pem", "CERTIFICATE", serverDER)
	p.keyFile = p.write(t, "server-key.pem", "PRIVATE KEY", serverKey)
	clientKey, clientDER := signed(t, caCert, caKey, "operator", x509.ExtKeyUsageClientAuth)
	p.client = keyPair(t, clientDER, clientKey)
	strangerKey, _, strangerDER := selfSigned(t, "stranger")
	sk, err := x509.MarshalPKCS8PrivateKey(strangerKey)
	if err != nil {
		t.Fatal(err)
	}
	p.strangerCert = keyPair(t, strangerDER, sk)
	return p
}

func (p *testPKI) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	file := filepath.Join(p.dir, name)
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func selfSigned(t *testing.T, name string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func signed(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) (keyDER, certDER []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	certDER, err = x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err = x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return keyDER, certDER
}

func keyPair(t *testing.T, certDER, keyDER []byte) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tlsClient trusts the test CA and presents cert (none when nil).
func tlsClient(p *testPKI, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: cfg},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// http.admin_listen moves the admin API and console to a listener of their own, with TLS from
// the certificate and key files and, with http.admin_client_ca_file, client certificates
// required (mTLS); the probes and /metrics stay on http.listen, which no longer serves the admin
// routes; a console login over TLS sets a Secure cookie.
func TestAdminListenerServesTLSWithClientCertificates(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	h := startTestHTTP(t, "", "  admin_listen: 127.0.0.1:0\n  admin_tls_cert_file: "+p.certFile+"\n  admin_tls_key_file: "+p.keyFile+
		"\n  admin_client_ca_file: "+p.caFile+"\n")
	if h.admin == "" || h.admin == h.addr {
		t.Fatalf("no admin listener of its own in the log:\n%s", h.log.String())
	}
	plain := &http.Client{Timeout: time.Minute}
	for path, want := range map[string]int{"/livez": 200, "/metrics": 200, "/api/v1/backlog": 404, "/console/login": 404} {
		resp, err := plain.Get("http://" + h.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s on http.listen: %d, want %d", path, resp.StatusCode, want)
		}
	}
	get := func(c *http.Client, scheme string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, scheme+"://"+h.admin+"/api/v1/backlog", nil)
		req.Header.Set("Authorization", "Bearer "+writeToken)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(tlsClient(p, &p.client), "https"); err != nil || code != http.StatusOK {
		t.Errorf("the admin API over TLS with the client certificate: %d, %v; want 200", code, err)
	}
	for name, c := range map[string]*http.Client{"no client certificate": tlsClient(p, nil),
		"a client certificate of another CA": tlsClient(p, &p.strangerCert)} {
		if code, err := get(c, "https"); err == nil {
			t.Errorf("the admin API over TLS with %s: %d, want the handshake refused", name, code)
		}
	}
	if code, err := get(plain, "http"); err == nil && code == http.StatusOK {
		t.Errorf("the admin API in plain HTTP on the TLS listener: %d", code)
	}
	form := url.Values{"token": {writeToken}, "next": {"/console/keys"}}
	req, _ := http.NewRequest(http.MethodPost, "https://"+h.admin+"/console/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://"+h.admin)
	resp, err := tlsClient(p, &p.client).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if cookies := resp.Cookies(); resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].Secure {
		t.Errorf("console login over TLS: %d, cookies %v; want 303 and one Secure cookie", resp.StatusCode, cookies)
	}
	if strings.Contains(h.log.String(), "without TLS") {
		t.Errorf("a warning about plain HTTP with TLS configured:\n%s", h.log.String())
	}
}

// A relay whose admin API and console listen beyond loopback without TLS says so at start, as a
// warning; on loopback it does not.
func TestAdminWithoutTLSBeyondLoopbackWarns(t *testing.T) {
	t.Parallel()
	for listen, warns := range map[string]bool{"0.0.0.0:0": true, "127.0.0.1:0": false, "localhost:0": false} {
		h := startTestHTTP(t, "", "  listen: "+listen+"\n")
		got := strings.Contains(h.log.String(), `"level":"WARN","msg":"the admin API and console listen beyond loopback without TLS`)
		if got != warns {
			t.Errorf("http.listen %s: warning %v, want %v; log:\n%s", listen, got, warns, h.log.String())
		}
	}
}
