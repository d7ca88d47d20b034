package relayconfig

import (
	"fmt"
	"net"
	"strconv"
)

// DefaultListen is the default address of the relay's /metrics and /healthz endpoints.
const DefaultListen = "127.0.0.1:9464"

// HTTP is the http section.
type HTTP struct {
	// Listen is the address of /metrics and /healthz. Default: DefaultListen; "" disables them.
	Listen string
	// AdminReadTokensFile and AdminWriteTokensFile name files of "name:token" lines: bearer
	// tokens of the admin API and console (read scope; write scope, which may also act). With no
	// token (no file, no OUTBOXKIT_ADMIN_*_TOKENS variable) the API and console are off.
	AdminReadTokensFile  string
	AdminWriteTokensFile string
}

// fields binds the section's keys; listenSet records that listen was given a value.
func (h *HTTP) fields(listenSet *bool) []field {
	return []field{{key: "listen", target: &h.Listen, set: listenSet},
		{key: "admin_read_tokens_file", target: &h.AdminReadTokensFile},
		{key: "admin_write_tokens_file", target: &h.AdminWriteTokensFile}}
}

// validate checks the listen address.
func (h *HTTP) validate() error {
	if h.Listen != "" {
		if _, port, err := net.SplitHostPort(h.Listen); err != nil {
			return fmt.Errorf("http.listen: %q is not a host:port address (use \"\" to disable the endpoint)", h.Listen)
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("http.listen: %q has an invalid port", h.Listen)
		}
	}
	return nil
}
