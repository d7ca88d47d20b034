package main

import (
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
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

// A relay without admin tokens handles SIGHUP too: the signal a token reloader sends (a sidecar,
// `kill -HUP`) is logged and ignored, and the relay keeps relaying. SIGHUP's default action
// would end the process.
func TestRelayWithoutAdminTokensSurvivesSIGHUP(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	table, topic := testsupport.UniqueName("cli_hup"), testsupport.UniqueName("cli.hup")
	dropTables(t, db, table)
	dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table,
		fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\n", strings.Join(testsupport.KafkaBrokers(t), ", "))))
	if res := cli(t, dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	relay := startRelay(t, dir)
	relay.waitLog(t, "admin API and console off: no admin token configured (http.admin_read_tokens_file, http.admin_write_tokens_file)")
	relay.waitLog(t, "forwarder started")
	if err := relay.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	relay.waitLog(t, "SIGHUP ignored: the admin API and console are off (no admin token at start); a token added now needs a restart")
	id := writeEventsIn(t, db, "postgres", table, topic, 1)[0]
	st := 0
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		err := db.QueryRow("SELECT status FROM "+table+" WHERE event_id = $1", id).Scan(&st)
		if errors.Is(err, sql.ErrNoRows) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("an event written after the SIGHUP is still in the table (status %d); relay log:\n%s", st, relay.log())
}
