package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// outboxkit probe exits 0 on a 200, 1 on another status or no answer, 2 on a bad URL.
func TestProbe(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/livez" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	cases := []struct {
		url  string
		code int
		err  string
	}{
		{srv.URL + "/livez", exitOK, ""},
		{srv.URL + "/readyz", exitRuntime, "503"},
		{"http://127.0.0.1:1/livez", exitRuntime, "connect"},
		{"http://bad host/", exitUsage, "--url"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run([]string{"probe", "--url", c.url, "--timeout", "5s"}, strings.NewReader(""), &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.err) {
			t.Errorf("probe %s: exit %d, stderr %q; want exit %d and %q", c.url, code, stderr.String(), c.code, c.err)
		}
	}
}
