package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

// hostile is markup that runs script if a page renders it as HTML: each form sets a global the
// browser test reads.
const hostile = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"><svg onload="window.__pwned=3">` +
	`"'><iframe srcdoc="<script>parent.__pwned=4</script>">`

// securityTarget is the relay's HTTP server of the security suite: a dead letter whose payload,
// headers and failure reason are hostile markup, a write and a read token.
type securityTarget struct {
	*testHTTP
	base string
	db   *sql.DB
	dead uuid.UUID
}

func startSecurityTarget(t *testing.T) *securityTarget {
	t.Helper()
	h := startTestHTTP(t, "", "")
	s := &securityTarget{testHTTP: h, base: "http://" + h.addr, db: h.db}
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite, Table: outbox.DefaultTable})
	if err != nil {
		t.Fatal(err)
	}
	e := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: "orders", AggregateType: "order", AggregateID: "o-1",
		EventType: "OrderPlaced", Payload: []byte(hostile), Headers: map[string]string{"x-note": hostile}}
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTx(context.Background(), tx, e); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec("UPDATE "+outbox.DefaultTable+" SET status = 2, attempts = 3, last_error = ? WHERE event_id = ?",
		"kafka: refused "+hostile, e.ID.String()); err != nil {
		t.Fatal(err)
	}
	s.dead = e.ID
	return s
}

// status is the dead letter's status (-1: gone).
func (s *securityTarget) status(t *testing.T) int {
	t.Helper()
	st := -1
	if err := s.db.QueryRow("SELECT status FROM "+outbox.DefaultTable+" WHERE event_id = ?", s.dead.String()).Scan(&st); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return st
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends a request with headers (name, value pairs) and returns the status.
func do(t *testing.T, method, target, contentType string, body io.Reader, cookie *http.Cookie, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

// consoleSession logs token in through the login form and returns the session cookie.
func (s *securityTarget) consoleSession(t *testing.T, token string) *http.Cookie {
	t.Helper()
	resp := do(t, http.MethodPost, s.base+"/console/login", "application/x-www-form-urlencoded",
		strings.NewReader(url.Values{"token": {token}}.Encode()), nil, "Origin", s.base)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
	}
	return resp.Cookies()[0]
}

// The security suite, with raw HTTP: a cross-site form refused, a read token refused on every
// mutating route of the API and the console (dry runs included), a logged-out session refused,
// oversized and slow bodies refused; nothing of it changes the dead letter.
func TestSecuritySuiteRawHTTP(t *testing.T) {
	t.Parallel()
	s := startSecurityTarget(t)
	form := "application/x-www-form-urlencoded"
	ops := s.consoleSession(t, writeToken)
	action := url.Values{"event_id": {s.dead.String()}}.Encode()
	for _, hdr := range [][]string{{"Origin", "http://evil.example"}, {"Sec-Fetch-Site", "cross-site"}, {"Origin", "null"}} {
		if resp := do(t, http.MethodPost, s.base+"/console/actions/discard", form, strings.NewReader(action), ops, hdr...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a console action with %s: %s: %d, want 403", hdr[0], hdr[1], resp.StatusCode)
		}
	}
	for _, a := range []string{"skip", "replay", "discard"} {
		for _, dry := range []string{"true", "false"} {
			body := `{"event_ids": ["` + s.dead.String() + `"], "dry_run": ` + dry + `}`
			if resp := do(t, http.MethodPost, s.base+"/api/v1/actions/"+a, "application/json", strings.NewReader(body), nil,
				"Authorization", "Bearer "+readToken); resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST /api/v1/actions/%s (dry run %s) with the read token: %d, want 403", a, dry, resp.StatusCode)
			}
		}
	}
	viewer := s.consoleSession(t, readToken)
	for _, a := range []string{"skip", "replay", "discard"} {
		for _, dry := range []string{"1", ""} {
			body := url.Values{"event_id": {s.dead.String()}, "dry_run": {dry}}.Encode()
			if resp := do(t, http.MethodPost, s.base+"/console/actions/"+a, form, strings.NewReader(body), viewer, "Origin", s.base); resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST /console/actions/%s (dry run %q) with a read session: %d, want 403", a, dry, resp.StatusCode)
			}
		}
	}
	if resp := do(t, http.MethodPost, s.base+"/console/logout", form, nil, ops, "Origin", s.base); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp := do(t, http.MethodPost, s.base+"/console/actions/discard", form, strings.NewReader(action), ops, "Origin", s.base); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a console action with a logged-out session: %d, want 401", resp.StatusCode)
	}
	big := strings.NewReader("token=" + strings.Repeat("a", 10<<20))
	if resp := do(t, http.MethodPost, s.base+"/console/login", form, big, nil, "Origin", s.base); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 10 MiB login: %d, want 413", resp.StatusCode)
	}
	huge := io.MultiReader(strings.NewReader(`{"event_ids": ["`), strings.NewReader(strings.Repeat("a", 17<<20)))
	if resp := do(t, http.MethodPost, s.base+"/api/v1/actions/discard", "application/json", huge, nil, "Authorization", "Bearer "+writeToken); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 17 MiB action body: %d, want 413", resp.StatusCode)
	}
	// A slow body, on a server of its own with a short read timeout (the large bodies above need
	// the default on a busy machine).
	slow := startTestHTTP(t, "", "  read_timeout: 1s\n")
	conn, err := net.Dial("tcp", slow.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /console/login HTTP/1.1\r\nHost: %s\r\nOrigin: http://%s\r\nContent-Type: %s\r\nContent-Length: 1000\r\n\r\ntoken=", slow.addr, slow.addr, form)
	waitClosed(t, conn, conn, "a slow login body")
	if st := s.status(t); st != 2 {
		t.Errorf("the dead letter has status %d after the refused requests, want 2 (dead, untouched)", st)
	}
}

// The security suite in headless Chromium: markup in an event's payload, headers and failure
// reason stays text on every page that shows them (no script runs, no element is made of it); a
// cross-site page that posts a form to the console changes nothing; a login with a hostile next
// never leaves the console (a second server, the "other site", counts the visits it gets).
func TestSecuritySuiteInChromium(t *testing.T) {
	t.Parallel()
	s := startSecurityTarget(t)
	var visits atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/attack" {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<form id=f method=post action="%s/console/actions/discard"><input name=event_id value="%s"></form>`+
				`<script>document.getElementById("f").submit()</script>`, s.base, s.dead)
			return
		}
		if r.URL.Path == "/raw" { // the control: the markup rendered as HTML
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<main><h1>raw</h1>%s</main>", hostile)
			return
		}
		visits.Add(1)
		fmt.Fprint(w, "other site")
	}))
	t.Cleanup(evil.Close)
	evilHost := strings.Replace(strings.TrimPrefix(evil.URL, "http://"), "127.0.0.1", "localhost", 1)
	ctx := browser(t)
	login := func(next string) string {
		page(t, ctx, "login page", chromedp.Navigate(s.base+"/console/login?next="+url.QueryEscape(next)),
			chromedp.WaitVisible(chromedp.CSS(`#login`)),
			chromedp.SendKeys(chromedp.CSS(`input[name=token]`), writeToken),
			chromedp.Submit(chromedp.CSS(`#login`)), chromedp.WaitReady(chromedp.CSS(`body > main, body`)))
		var href string
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			h, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
			if err == nil && !strings.Contains(h, "/console/login") {
				href = h
				break
			}
		}
		return href
	}
	for _, next := range []string{`/console/../\` + evilHost + `/`, "//" + evilHost + "/console/", "http://" + evilHost + "/console/",
		`/console/%2e%2e/%5c` + evilHost, `/console/..%2f..%2f%5c` + evilHost} {
		if href := login(next); !strings.HasPrefix(href, s.base+"/console/") {
			t.Errorf("login with next %q ended on %q, want a page under %s/console/", next, href, s.base)
		}
	}
	if n := visits.Load(); n != 0 {
		t.Errorf("the other site got %d visits from the logins", n)
	}
	const probe = `String(window.__pwned) + "/" + document.querySelectorAll("main img, main svg, main iframe, main script").length`
	// The control: the same markup rendered as HTML on a page without a policy is noticed.
	page(t, ctx, "control", chromedp.Navigate(evil.URL+"/raw"), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
	if verdict, err := chromedp.Run(ctx, chromedp.Evaluate[string](probe)); err != nil || verdict == "undefined/0" {
		t.Fatalf("the probe does not notice the markup rendered as HTML: %q, %v", verdict, err)
	}
	for _, path := range []string{"/console/dead-letters", "/console/dead-letters/" + s.dead.String(), "/console/keys", "/console/groups"} {
		page(t, ctx, path, chromedp.Navigate(s.base+path), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
		verdict, err := chromedp.Run(ctx, chromedp.Evaluate[string](probe))
		if err != nil {
			t.Fatal(err)
		}
		if verdict != "undefined/0" {
			t.Errorf("%s: the hostile markup ran or made elements: window.__pwned/elements = %s", path, verdict)
		}
		text := readText(t, ctx, "main")
		if !strings.Contains(text, "<script>window.__pwned=1</script>") && path != "/console/keys" && path != "/console/groups" {
			t.Errorf("%s does not show the markup as text: %.500q", path, text)
		}
	}
	page(t, ctx, "cross-site form", chromedp.Navigate(strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)+"/attack"),
		chromedp.WaitReady(chromedp.CSS(`body`)))
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if h, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); err == nil && strings.HasPrefix(h, s.base) {
			break
		}
	}
	if st := s.status(t); st != 2 {
		t.Errorf("a cross-site form posted to the console changed the dead letter: status %d, want 2", st)
	}
}
