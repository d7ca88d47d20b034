package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
)

// startRelayHTTP serves the relay's endpoints on http.listen (unless it is "") and, when tokens
// are configured, the admin API and console (which publish through the broker's publisher once
// it is stored): on http.admin_listen when it is set (with TLS when its files are), else beside
// the probes. It warns when the admin routes listen beyond loopback without TLS. The returned
// function stops the servers.
func startRelayHTTP(cfg relayconfig.Config, db *sql.DB, registry *prometheus.Registry, running *atomic.Bool,
	publisher *atomic.Pointer[message.Publisher], logger *slog.Logger) (func(), error) {
	h := cfg.HTTP
	if h.Listen == "" && h.AdminListen == "" {
		return func() {}, nil
	}
	mount, stopReloads, err := adminRoutes(cfg, db, func() message.Publisher {
		if p := publisher.Load(); p != nil {
			return *p
		}
		return nil
	}, logger)
	if err != nil {
		return nil, err
	}
	stops := []func(){stopReloads}
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if h.AdminListen != "" {
		stop, err := serveAdmin(h, mount, logger)
		if err != nil {
			stopAll()
			return nil, err
		}
		stops = append(stops, stop)
		mount = nil // the probes' listener serves no admin route
	}
	if h.Listen != "" {
		stop, err := serveHTTP(h, registry, db, running, logger, mount)
		if err != nil {
			stopAll()
			return nil, err
		}
		stops = append(stops, stop)
	}
	return stopAll, nil
}

// serveAdmin serves the admin API and console (mount; nil when no token is configured) on
// http.admin_listen, with TLS when its files are set.
func serveAdmin(h relayconfig.HTTP, mount func(*http.ServeMux), logger *slog.Logger) (func(), error) {
	tlsConfig, err := adminTLS(h)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", h.AdminListen)
	if err != nil {
		return nil, fmt.Errorf("http.admin_listen %s: %w", h.AdminListen, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	mux := http.NewServeMux()
	if mount != nil {
		mount(mux)
		warnPlainAdmin(h.AdminListen, tlsConfig != nil, logger)
	}
	stop := serve(ln, h, mux, logger)
	logger.Info("serving the admin API and console", "addr", ln.Addr().String(), "tls", tlsConfig != nil,
		"client_certificates", tlsConfig != nil && tlsConfig.ClientAuth == tls.RequireAndVerifyClientCert)
	return stop, nil
}

// adminTLS is the admin listener's TLS configuration from its files (nil without them): TLS 1.2
// or later, and client certificates of http.admin_client_ca_file required when it is set.
func adminTLS(h relayconfig.HTTP) (*tls.Config, error) {
	if h.AdminTLSCertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(h.AdminTLSCertFile, h.AdminTLSKeyFile)
	if err != nil {
		return nil, usageErr(fmt.Errorf("http.admin_tls_cert_file %s, http.admin_tls_key_file %s: %w",
			h.AdminTLSCertFile, h.AdminTLSKeyFile, err))
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if h.AdminClientCAFile != "" {
		pem, err := os.ReadFile(h.AdminClientCAFile)
		if err != nil {
			return nil, usageErr(fmt.Errorf("http.admin_client_ca_file: %w", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageErr(fmt.Errorf("http.admin_client_ca_file %s: no PEM certificate in it", h.AdminClientCAFile))
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// warnPlainAdmin warns when the admin API and console listen on addr beyond the loopback
// without TLS: their tokens and session cookies then cross the network in clear.
func warnPlainAdmin(addr string, withTLS bool, logger *slog.Logger) {
	if withTLS {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return
	}
	logger.Warn("the admin API and console listen beyond loopback without TLS: tokens and session cookies cross the network in clear; "+
		"set http.admin_listen with http.admin_tls_cert_file and http.admin_tls_key_file (docs/security.md)", "addr", addr)
}

// serveHTTP serves /metrics, /livez, /readyz and /healthz on cfg.Listen, with cfg's timeouts,
// until the returned function is called. The listener is opened before it returns, so a taken
// port fails the relay at once. mount (nil for none) adds the admin API and console.
func serveHTTP(cfg relayconfig.HTTP, registry *prometheus.Registry, db *sql.DB, running *atomic.Bool, logger *slog.Logger,
	mount func(*http.ServeMux)) (func(), error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("http.listen %s: %w", cfg.Listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	// Liveness: the process serves. It never looks at a dependency, so an orchestrator does not
	// restart every relay during a database or broker outage (the relay rides those out itself).
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	ready := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !running.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "relay not running")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := db.PingContext(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "database unreachable")
			return
		}
		fmt.Fprintln(w, "ok")
	}
	// Readiness: the relay runs and its database answers. /healthz is the same check, kept for
	// existing probes (as a liveness probe it restarts relays during a database outage).
	mux.HandleFunc("GET /readyz", ready)
	mux.HandleFunc("GET /healthz", ready)
	if mount != nil {
		mount(mux)
		warnPlainAdmin(cfg.Listen, false, logger)
	}
	stop := serve(ln, cfg, mux, logger)
	logger.Info("serving /metrics and /healthz", "addr", ln.Addr().String(), "probes", "/livez /readyz")
	return stop, nil
}

// serve serves mux on ln with cfg's timeouts (every phase of a connection is bounded, so a slow
// or idle client or a request held in the database cannot hold it) and nosniff on every answer,
// until the returned function is called.
func serve(ln net.Listener, cfg relayconfig.HTTP, mux *http.ServeMux, logger *slog.Logger) func() {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		// The server's write deadline does not stop a handler: the request's context ends with
		// it, so the database work of a request held longer is cancelled and its connection freed.
		ctx, cancel := context.WithTimeout(r.Context(), cfg.WriteTimeout)
		defer cancel()
		mux.ServeHTTP(w, r.WithContext(ctx))
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server stopped", "error", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}
