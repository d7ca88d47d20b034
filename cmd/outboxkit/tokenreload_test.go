package main

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A SIGHUP makes a running relay read its token files again, without a restart: a removed token
// is refused by the API from then on, its console sessions end, a new token is accepted, and an
// unchanged token (and its session) keeps working. The relay keeps relaying.
func TestAdminTokensReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	r := launchAdminRelay(t, "reload", "")
	client := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "http://" + r.addr
	login := func(token string) *http.Cookie {
		form := url.Values{"token": {token}}
		req, _ := http.NewRequest(http.MethodPost, base+"/console/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
			t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
		}
		return resp.Cookies()[0]
	}
	page := func(c *http.Cookie) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/console/keys", nil)
		req.AddCookie(c)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	opsSession, viewerSession := login(writeToken), login(readToken)
	if page(opsSession) != http.StatusOK || page(viewerSession) != http.StatusOK {
		t.Fatalf("console pages with fresh sessions: %d %d", page(opsSession), page(viewerSession))
	}
	const newToken = "rotated-ops-secret-0123456789"
	if err := os.WriteFile(filepath.Join(r.dir, "write.tokens"), []byte("ops2:"+newToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.relay.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r.relay.waitLog(t, "admin tokens reloaded")
	for token, want := range map[string]int{writeToken: http.StatusUnauthorized, newToken: http.StatusOK, readToken: http.StatusOK} {
		if code := r.call(t, "GET", "/api/v1/backlog", token, nil, nil); code != want {
			t.Errorf("GET /api/v1/backlog with token %.8s… after the reload: %d, want %d", token, code, want)
		}
	}
	if code := page(opsSession); code != http.StatusSeeOther {
		t.Errorf("the console session of the removed token after the reload: %d, want 303 to the login", code)
	}
	if code := page(viewerSession); code != http.StatusOK {
		t.Errorf("the console session of the unchanged token after the reload: %d, want 200", code)
	}
	id := writeEventsIn(t, r.db, "postgres", r.table, r.topic, 1)[0]
	for deadline := time.Now().Add(time.Minute); r.status(t, id) != -1 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if st := r.status(t, id); st != -1 {
		t.Errorf("an event written after the reload is still in the table a minute later (status %d); relay log:\n%s", st, r.relay.log())
	}
}
