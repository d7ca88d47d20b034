package nats_test

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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/internal/testsupport/natsserver"
)

// TestTLS: a server requiring TLS with a certificate of a private CA is reached with tls.ca_file
// naming that CA, refused without it (the system pool does not know the CA), and reached with
// insecure_skip_verify (tests only).
func TestTLS(t *testing.T) {
	caPEM, serverCert := testCertificates(t)
	srv := natsserver.Start(t, natsserver.Options{TLS: &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(srv.URL(), "nats://", "tls://", 1)
	for _, tc := range []struct {
		name string
		tls  nats.TLSConfig
		ok   bool
	}{
		{"ca_file", nats.TLSConfig{CAFile: caFile}, true},
		{"system pool", nats.TLSConfig{Enabled: true}, false},
		{"insecure_skip_verify", nats.TLSConfig{InsecureSkipVerify: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub, err := nats.NewPublisher(nats.Config{URLs: []string{url}, TLS: tc.tls}, testLogger())
			if !tc.ok {
				if err == nil {
					_ = pub.Close()
					t.Fatal("connected to a server whose CA is not trusted")
				}
				return
			}
			if err != nil {
				t.Fatalf("new publisher: %v", err)
			}
			defer pub.Close()
			if errs := pub.PublishEach(t.Context(), "tls", []*message.Message{keyed("a", 0)}); errs[0] != nil {
				t.Fatalf("publish: %v", errs[0])
			}
		})
	}
}

// testCertificates returns the PEM of a new CA and a server certificate for 127.0.0.1 it signed.
func testCertificates(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "outboxkit test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), cert
}
