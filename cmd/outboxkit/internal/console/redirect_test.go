package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// After a login, a hostile next never takes the browser out of /console/ on the relay's own
// host: encoded, backslashed, dot-segment, absolute, scheme-relative and mixed forms all end on
// a console page (the backlog when next is refused).
func TestLoginNextNeverLeavesTheConsole(t *testing.T) {
	mux := newTestConsole(t)
	hostile := []string{
		`/console/../\evil.example`,
		`/console/..\evil.example`,
		`/console/..%5cevil.example`,
		`/console/%2e%2e/%5cevil.example`,
		`/console/%2E%2E/%2E%2E/evil`,
		`/console/..%2f..%2f%5cevil.example`,
		`/console/../../evil`,
		`/console/./../evil`,
		`/console/\\evil.example`,
		`/console/%5c%5cevil.example`,
		`https://evil.example/console/`,
		`http:/console/`,
		`//evil.example/console/`,
		`///evil.example/console/`,
		`\\evil.example/console/`,
		`/\evil.example/console/`,
		`/console/..//evil.example`,
		`/console/%2f%2fevil.example`,
		`/console/../%2fevil.example`,
		"/console/\t/../evil",
		"/console/%09/../..//evil",
		"/console/%0d%0aLocation:%20https://evil.example",
		`javascript:alert(1)//console/`,
		`/console/@evil.example`,
		`/CONSOLE/../evil`,
		`/console/..;/evil`,
		`/console/.%2e/evil`,
		`/console/%252e%252e/evil`,
	}
	for _, next := range hostile {
		t.Run(next, func(t *testing.T) {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, loginRequest(readToken, next))
			if w.Code != http.StatusSeeOther {
				t.Fatalf("login with next %q: %d, want 303", next, w.Code)
			}
			if err := staysInConsole(w.Header().Get("Location")); err != nil {
				t.Errorf("next %q: %v", next, err)
			}
		})
	}
	// A next inside the console is kept, with its query.
	for next, want := range map[string]string{
		"/console/keys?topic=orders&group=3f2a": "/console/keys?topic=orders&group=3f2a",
		"/console/dead-letters/0190a5c4":        "/console/dead-letters/0190a5c4",
		"":                                      "/console/backlog",
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, loginRequest(readToken, next))
		if got := w.Header().Get("Location"); got != want {
			t.Errorf("next %q: Location %q, want %q", next, got, want)
		}
	}
}

// staysInConsole reports why a Location header could take a browser out of /console/ on the
// same host: a browser (the WHATWG URL parser) reads a backslash as a slash and %2e as a dot
// segment, so neither may appear, nor may a dot segment, a scheme, a host or a control character.
func staysInConsole(loc string) error {
	lower := strings.ToLower(loc)
	switch {
	case !strings.HasPrefix(loc, "/console/"):
		return fmt.Errorf("Location %q does not start with /console/", loc)
	case strings.ContainsAny(loc, "\\\t\r\n "):
		return fmt.Errorf("Location %q holds a backslash or white space", loc)
	case strings.Contains(lower, "%2e") || strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c"):
		return fmt.Errorf("Location %q holds an encoded dot, slash or backslash", loc)
	}
	p, _, _ := strings.Cut(loc, "?")
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("Location %q holds a dot segment", loc)
		}
	}
	base, _ := url.Parse("http://relay.test/console/login")
	u, err := base.Parse(loc)
	if err != nil {
		return fmt.Errorf("Location %q: %v", loc, err)
	}
	if u.Host != "relay.test" || !strings.HasPrefix(u.Path, "/console/") {
		return fmt.Errorf("Location %q resolves to %s", loc, u)
	}
	return nil
}
