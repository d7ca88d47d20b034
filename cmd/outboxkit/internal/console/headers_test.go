package console

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// inlineCode finds what a CSP without 'unsafe-inline' would block or what would need it: an
// inline script or style element, an event handler attribute, a style attribute, a javascript: URL.
var inlineCode = regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]|<style|\son[a-z]+\s*=|\sstyle\s*=|javascript:`)

// Every console page is served with a Content-Security-Policy that allows no inline script or
// style, and sets form-action, base-uri and frame-ancestors; the pages hold no inline code, so the
// policy costs nothing; console and API answers say X-Content-Type-Options: nosniff.
func TestConsoleHeadersForbidInlineCode(t *testing.T) {
	mux := newTestConsole(t)
	cookie := loginCookie(t, mux, writeToken)
	for _, path := range []string{"/console/login", "/console/backlog", "/console/relays", "/console/keys", "/console/groups",
		"/console/dead-letters", "/console/dead-letters/0190a5c4-0000-7000-8000-000000000000", "/console/no-such-page", "/api/v1/backlog"} {
		r := httptest.NewRequest(http.MethodGet, "http://relay.test"+path, nil)
		r.AddCookie(cookie)
		r.Header.Set("Authorization", "Bearer "+readToken)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s (%d): X-Content-Type-Options %q, want nosniff", path, w.Code, got)
		}
		if strings.HasPrefix(path, "/api/") {
			continue
		}
		csp := w.Header().Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "form-action 'self'", "base-uri 'none'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s (%d): Content-Security-Policy %q lacks %q", path, w.Code, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s (%d): Content-Security-Policy %q allows inline code", path, w.Code, csp)
		}
		if m := inlineCode.FindString(w.Body.String()); m != "" {
			t.Errorf("%s (%d): the page holds inline code: %q", path, w.Code, m)
		}
	}
	// The style sheet and the script, served to anyone (the login page needs them), typed.
	for path, want := range map[string]string{"/console/static/console.css": "text/css", "/console/static/live.js": "text/javascript"} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://relay.test"+path, nil))
		if ct := w.Header().Get("Content-Type"); w.Code != http.StatusOK || !strings.HasPrefix(ct, want) ||
			w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d, Content-Type %q, want 200 %s with nosniff", path, w.Code, ct, want)
		}
	}
}
