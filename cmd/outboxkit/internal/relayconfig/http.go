package relayconfig

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// DefaultListen is the default address of the relay's /metrics and /healthz endpoints.
const DefaultListen = "127.0.0.1:9464"

// Default timeouts of the relay's HTTP server. The write timeout covers a whole answer, so it is
// longer than the admin API's bound on one request's database work (30 s).
const (
	DefaultReadTimeout  = 30 * time.Second
	DefaultWriteTimeout = 60 * time.Second
	DefaultIdleTimeout  = 120 * time.Second
)

// HTTP is the http section.
type HTTP struct {
	// Listen is the address of /metrics and /healthz. Default: DefaultListen; "" disables them.
	Listen string
	// AdminReadTokensFile and AdminWriteTokensFile name files of "name:token" lines: bearer
	// tokens of the admin API and console (read scope; write scope, which may also act). With no
	// token (no file, no OUTBOXKIT_ADMIN_*_TOKENS variable) the API and console are off.
	AdminReadTokensFile  string
	AdminWriteTokensFile string
	// ReadTimeout bounds reading a whole request, body included: a client sending slower is
	// cut off. Default: DefaultReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end of its answer.
	// Default: DefaultWriteTimeout.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its next request.
	// Default: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// AllowedHosts are the host names (without port) the admin API and console answer to,
	// besides IP addresses and localhost: a request naming another host is refused, so that a
	// page whose name resolves to the relay (DNS rebinding) cannot use them.
	AllowedHosts []string
	// AdminListen is the address of a listener of the admin API and console alone; "" (the
	// default) serves them on Listen. With it, Listen serves the probes and /metrics only.
	AdminListen string
	// AdminTLSCertFile and AdminTLSKeyFile are PEM files of the admin listener's certificate
	// (its chain) and key: the admin listener then speaks TLS only. Both or neither.
	AdminTLSCertFile string
	AdminTLSKeyFile  string
	// AdminClientCAFile is a PEM file of the certificate authorities whose client certificates
	// the admin listener requires (mutual TLS); "" asks for none.
	AdminClientCAFile string
}

// fields binds the section's keys; listenSet records that listen was given a value.
func (h *HTTP) fields(listenSet *bool) []field {
	return []field{{key: "listen", target: &h.Listen, set: listenSet},
		{key: "admin_read_tokens_file", target: &h.AdminReadTokensFile},
		{key: "admin_write_tokens_file", target: &h.AdminWriteTokensFile},
		{key: "read_timeout", target: &h.ReadTimeout, positive: true},
		{key: "write_timeout", target: &h.WriteTimeout, positive: true},
		{key: "idle_timeout", target: &h.IdleTimeout, positive: true},
		{key: "allowed_hosts", target: &h.AllowedHosts},
		{key: "admin_listen", target: &h.AdminListen},
		{key: "admin_tls_cert_file", target: &h.AdminTLSCertFile},
		{key: "admin_tls_key_file", target: &h.AdminTLSKeyFile},
		{key: "admin_client_ca_file", target: &h.AdminClientCAFile}}
}

// validate checks the addresses and the admin listener's TLS files, and fills the timeouts'
// defaults.
func (h *HTTP) validate() error {
	if err := checkAddr("http.listen", h.Listen); err != nil {
		return err
	}
	if err := checkAddr("http.admin_listen", h.AdminListen); err != nil {
		return err
	}
	switch {
	case (h.AdminTLSCertFile == "") != (h.AdminTLSKeyFile == ""):
		return fmt.Errorf("http.admin_tls_cert_file and http.admin_tls_key_file: set both or neither (cert %q, key %q)",
			h.AdminTLSCertFile, h.AdminTLSKeyFile)
	case h.AdminTLSCertFile != "" && h.AdminListen == "":
		return fmt.Errorf("http.admin_tls_cert_file: TLS is for the admin listener: set http.admin_listen too")
	case h.AdminClientCAFile != "" && h.AdminTLSCertFile == "":
		return fmt.Errorf("http.admin_client_ca_file: client certificates need TLS: set http.admin_tls_cert_file and http.admin_tls_key_file")
	}
	for i, host := range h.AllowedHosts {
		if host == "" || strings.ContainsAny(host, ":/ ") {
			return fmt.Errorf("http.allowed_hosts[%d]: %q is not a host name (no port, no scheme)", i, host)
		}
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&h.ReadTimeout, DefaultReadTimeout}, {&h.WriteTimeout, DefaultWriteTimeout}, {&h.IdleTimeout, DefaultIdleTimeout}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	return nil
}

// checkAddr checks a host:port address of key ("" is allowed: that listener is off).
func checkAddr(key, addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %q is not a host:port address (use \"\" to disable the endpoint)", key, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%s: %q has an invalid port", key, addr)
	}
	return nil
}
