// Package natsserver runs a real NATS server with JetStream inside the test process
// (github.com/nats-io/nats-server/v2/server, the version pinned in go.mod): on a loopback port,
// with a temporary store, stopped with the test. Tests that must stop and restart the broker do
// it here without touching the shared server of scripts/services.sh. It is a package of its own
// so that only the tests that start a server compile and link the server.
package natsserver

import (
	"crypto/tls"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options tune the server; zero values keep NATS' defaults.
type Options struct {
	// MaxPayload is the server's max_payload in bytes (NATS' default 1 MiB).
	MaxPayload int32
	// Username and Password, or Token, require authentication.
	Username, Password, Token string
	// TLS, when set, makes the server require TLS with this configuration.
	TLS *tls.Config
}

// Server is an in-process NATS server with JetStream.
type Server struct {
	t     testing.TB
	opts  server.Options
	srv   *server.Server
	port  int
	store string
}

// Start starts a server for t on a free loopback port, with JetStream storing in t.TempDir();
// it is shut down when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{t: t, store: t.TempDir(), port: freePort(t)}
	s.opts = server.Options{
		Host:                   "127.0.0.1",
		Port:                   s.port,
		JetStream:              true,
		StoreDir:               s.store,
		NoLog:                  true,
		NoSigs:                 true,
		MaxPayload:             o.MaxPayload,
		Username:               o.Username,
		Password:               o.Password,
		Authorization:          o.Token,
		DisableJetStreamBanner: true,
	}
	if o.TLS != nil {
		s.opts.TLS, s.opts.TLSConfig, s.opts.TLSTimeout = true, o.TLS, 5
	}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the client URL, nats://127.0.0.1:PORT (the same across Restart).
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// Stop shuts the server down (clients see the connection drop and start reconnecting).
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart stops the server if it runs and starts it again on the same port and store: the
// streams and their messages survive (file storage).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Running reports whether the server is up.
func (s *Server) Running() bool { return s.srv != nil }

func (s *Server) start() {
	s.t.Helper()
	opts := s.opts // the server keeps and modifies its options
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("natsserver: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(20 * time.Second) {
		srv.Shutdown()
		s.t.Fatalf("natsserver: not ready for connections on %s after 20s", s.URL())
	}
	s.srv = srv
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natsserver: no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
