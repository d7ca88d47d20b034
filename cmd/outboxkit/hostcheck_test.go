package main

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// The admin API and the console answer only requests whose Host is an IP address, localhost or
// one of http.allowed_hosts (a page of another name that resolves to the relay, DNS rebinding,
// gets 421); the probes and /metrics answer any Host.
func TestAdminRoutesCheckTheHost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, section string
		hosts         map[string]int // Host (":port" is added to those ending in ':') → status
	}{
		{"default", "", map[string]int{
			"evil.example:": http.StatusMisdirectedRequest, "evil.example": http.StatusMisdirectedRequest,
			"relay.example.com:": http.StatusMisdirectedRequest,
			"127.0.0.1:":         http.StatusOK, "localhost:": http.StatusOK, "[::1]:": http.StatusOK, "10.1.2.3:": http.StatusOK,
		}},
		{"configured", "  allowed_hosts: [relay.example.com, Admin.Example.org.]\n", map[string]int{
			"evil.example:": http.StatusMisdirectedRequest, "relay.example.com.evil.example:": http.StatusMisdirectedRequest,
			"relay.example.com:": http.StatusOK, "RELAY.example.com": http.StatusOK, "admin.example.org:": http.StatusOK,
			"127.0.0.1:": http.StatusOK,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := startTestHTTP(t, "", c.section)
			_, port, _ := net.SplitHostPort(h.addr)
			get := func(host, path string) int {
				req, err := http.NewRequest(http.MethodGet, "http://"+h.addr+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = host
				req.Header.Set("Authorization", "Bearer "+writeToken)
				resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				return resp.StatusCode
			}
			for host, want := range c.hosts {
				if host[len(host)-1] == ':' {
					host += port
				}
				for _, path := range []string{"/api/v1/backlog", "/console/login"} {
					if code := get(host, path); code != want {
						t.Errorf("GET %s with Host %s: %d, want %d", path, host, code, want)
					}
				}
			}
			for _, path := range []string{"/livez", "/metrics"} {
				if code := get("evil.example", path); code != http.StatusOK {
					t.Errorf("GET %s with Host evil.example: %d, want 200 (probes and metrics answer any host)", path, code)
				}
			}
		})
	}
}
