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
}

// fields binds the section's keys; listenSet records that listen was given a value.
func (h *HTTP) fields(listenSet *bool) []field {
	return []field{{key: "listen", target: &h.Listen, set: listenSet},
		{key: "admin_read_tokens_file", target: &h.AdminReadTokensFile},
		{key: "admin_write_tokens_file", target: &h.AdminWriteTokensFile},
		{key: "read_timeout", target: &h.ReadTimeout, positive: true},
		{key: "write_timeout", target: &h.WriteTimeout, positive: true},
		{key: "idle_timeout", target: &h.IdleTimeout, positive: true},
		{key: "allowed_hosts", target: &h.AllowedHosts}}
}

// validate checks the listen address and fills the timeouts' defaults.
func (h *HTTP) validate() error {
	if h.Listen != "" {
		if _, port, err := net.SplitHostPort(h.Listen); err != nil {
			return fmt.Errorf("http.listen: %q is not a host:port address (use \"\" to disable the endpoint)", h.Listen)
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("http.listen: %q has an invalid port", h.Listen)
		}
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
