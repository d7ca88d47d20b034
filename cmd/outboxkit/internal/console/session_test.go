package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
)

// The console's cookie holds a session id, not the token: it does not carry the token, it
// expires, and a logout ends the session on the server, so the cookie replayed afterwards is
// refused (a GET goes to the login page, a POST is 401).
func TestConsoleCookieIsASessionEndedAtLogout(t *testing.T) {
	mux := newTestConsole(t)
	cookie := loginCookie(t, mux, writeToken)
	if strings.Contains(cookie.Value, writeToken) || strings.Contains(cookie.Value, "ops-secret") {
		t.Errorf("the cookie holds the token: %q", cookie.Value)
	}
	if cookie.MaxAge <= 0 || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict and a Max-Age", cookie)
	}
	send := func(method, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://relay.test"+path, strings.NewReader("all=1&dry_run=1"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://relay.test")
		r.AddCookie(cookie)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	if w := send(http.MethodGet, "/console/keys"); w.Code != http.StatusOK {
		t.Fatalf("GET /console/keys with the session: %d", w.Code)
	}
	if w := send(http.MethodPost, "/console/logout"); w.Code != http.StatusSeeOther {
		t.Fatalf("logout: %d", w.Code)
	}
	if w := send(http.MethodGet, "/console/keys"); w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/console/login") {
		t.Errorf("GET /console/keys with the cookie of a session logged out: %d to %q, want 303 to the login", w.Code, w.Header().Get("Location"))
	}
	if w := send(http.MethodPost, "/console/actions/replay"); w.Code != http.StatusUnauthorized {
		t.Errorf("POST an action with the cookie of a session logged out: %d, want 401", w.Code)
	}
	// The token as a cookie value is no session either.
	cookie.Value = writeToken
	if w := send(http.MethodGet, "/console/keys"); w.Code != http.StatusSeeOther {
		t.Errorf("GET /console/keys with the token as the cookie: %d, want 303 to the login", w.Code)
	}
}

// A session lasts its TTL and no longer; ending one leaves the others.
func TestSessionsExpire(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	s := newSessions(time.Hour, func() time.Time { return now })
	a, err := s.start(adminapi.Token{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.start(adminapi.Token{Name: "b"})
	if a == b || len(a) < 40 {
		t.Fatalf("session ids %q and %q", a, b)
	}
	now = now.Add(59 * time.Minute)
	if tok, ok := s.get(a); !ok || tok.Name != "a" {
		t.Errorf("session a before its end: %v %v", tok, ok)
	}
	s.end(b)
	if _, ok := s.get(b); ok {
		t.Errorf("session b after its logout")
	}
	now = now.Add(time.Minute)
	if _, ok := s.get(a); ok {
		t.Errorf("session a at its expiry")
	}
}
