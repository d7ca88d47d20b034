package main

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// hostGuard passes a request to next only when its Host names the relay: an IP address,
// localhost, or one of allowed (case-insensitive, a trailing dot ignored). Anything else is
// refused with 421, so that a page of another name that resolves to the relay's address (DNS
// rebinding) cannot read the admin API or the console as a same-origin page.
func hostGuard(allowed []string, next http.Handler) http.Handler {
	names := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		names[normalHost(a)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = normalHost(host)
		if net.ParseIP(host) != nil || host == "localhost" || names[host] {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusMisdirectedRequest)
		fmt.Fprintf(w, "host %q is not an IP address, localhost or one of http.allowed_hosts\n", r.Host)
	})
}

// normalHost is a host name as compared: lower case, without a trailing dot or IPv6 brackets.
func normalHost(h string) string {
	return strings.TrimSuffix(strings.Trim(strings.ToLower(h), "[]"), ".")
}
