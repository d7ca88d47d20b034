package securepulsar

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Impostor is a man in the middle between a client and the secure broker: a TLS listener on
// 127.0.0.1 presenting a certificate that the broker's CA signed for another host name, which
// forwards each connection to the broker over TLS. It stands for anyone holding a certificate
// that the client trusts but that was not made for the host it dialled: a client that checks
// the host name refuses it; one that does not completes the handshake and sends its token,
// which the impostor records.
type Impostor struct {
	// URL is the impostor's service URL, pulsar+ssl://127.0.0.1:port.
	URL string
	// Name is the only host name of the impostor's certificate.
	Name string
	mu   sync.Mutex
	seen []byte // what clients sent, decrypted
}

// Seen returns the bytes clients sent through the impostor (after TLS), so a test can look for
// a token in them.
func (m *Impostor) Seen() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.seen...)
}

func (m *Impostor) record(p []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, p...)
}

// Write implements io.Writer for the client-to-broker copy.
func (m *Impostor) Write(p []byte) (int, error) {
	m.record(p)
	return len(p), nil
}

// StartImpostor starts an Impostor in front of b whose certificate names only name (a DNS
// name, no IP address), signed with the broker's CA key (ca.key beside b.CAFile, made by
// scripts/services/tls.sh). It stops with the test.
func (b Broker) StartImpostor(t testing.TB, name string) *Impostor {
	t.Helper()
	cert, err := signedFor(filepath.Join(filepath.Dir(b.CAFile), "ca.key"), b.CAFile, name)
	if err != nil {
		t.Fatalf("securepulsar: impostor certificate: %v", err)
	}
	caPEM, err := os.ReadFile(b.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	m := &Impostor{URL: "pulsar+ssl://" + ln.Addr().String(), Name: name}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return // closed by the cleanup
			}
			track(client)
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.forward(client, b.Addr(), pool, track)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return m
}

// forward relays client to the broker at addr over TLS, recording what the client sends. A
// client that refuses the impostor's certificate fails the handshake, and nothing is recorded.
func (m *Impostor) forward(client net.Conn, addr string, pool *x509.CertPool, track func(net.Conn)) {
	defer client.Close()
	if err := client.(*tls.Conn).Handshake(); err != nil {
		return
	}
	broker, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		return
	}
	track(broker)
	defer broker.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(client, broker)
		_ = client.Close()
	}()
	_, _ = io.Copy(io.MultiWriter(broker, m), client)
	_ = broker.Close()
	<-done
}

// signedFor returns a server certificate for the DNS name name, signed by the CA whose key and
// certificate are the PEM files keyFile and certFile.
func signedFor(keyFile, certFile, name string) (tls.Certificate, error) {
	caKey, err := readPEM(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	signer, err := x509.ParsePKCS8PrivateKey(caKey)
	if err != nil {
		return tls.Certificate{}, errors.Join(errors.New("CA key "+keyFile), err)
	}
	caDER, err := readPEM(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, signer)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// readPEM returns the DER bytes of the first PEM block of file.
func readPEM(file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New(file + ": no PEM block")
	}
	return block.Bytes, nil
}
