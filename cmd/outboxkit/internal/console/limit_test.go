package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The listings of the admin API and the console refuse a limit above their maximum with a 400
// that names the value, and serve one at the maximum.
func TestListingsRefuseALimitAboveTheMaximum(t *testing.T) {
	mux := newTestConsole(t)
	cookie := loginCookie(t, mux, readToken)
	get := func(path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "http://relay.test"+path, nil)
		if strings.HasPrefix(path, "/api/") {
			r.Header.Set("Authorization", "Bearer "+readToken)
		} else {
			r.AddCookie(cookie)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	for _, route := range []string{"/api/v1/dead-letters", "/api/v1/keys", "/api/v1/groups", "/console/dead-letters", "/console/keys"} {
		w := get(route + "?limit=1000001")
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "1000001") || !strings.Contains(w.Body.String(), "limit") {
			t.Errorf("%s?limit=1000001: %d %q, want 400 naming limit and the value", route, w.Code, cut(w.Body.String(), 300))
		}
		if w := get(route + "?limit=1000"); w.Code != http.StatusOK {
			t.Errorf("%s?limit=1000: %d %q, want 200", route, w.Code, cut(w.Body.String(), 300))
		}
	}
}
