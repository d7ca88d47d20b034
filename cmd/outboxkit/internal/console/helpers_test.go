package console

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// Tokens of the test console.
const (
	readToken  = "viewer-secret-0123456789"
	writeToken = "ops-secret-9876543210abcdef"
)

// newTestConsole returns the admin API and console on a migrated SQLite outbox table of the test,
// with a read and a write token, as the relay mounts them.
func newTestConsole(t *testing.T) *http.ServeMux {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	table, err := outbox.NewTable(outbox.SQLite, outbox.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	return newTestConsoleOn(t, db, outbox.SQLite, outbox.DefaultTable, slog.New(slog.DiscardHandler))
}

// newTestConsoleOn returns the admin API and console on db's outbox table, logging to logger.
func newTestConsoleOn(t *testing.T, db *sql.DB, dialect outbox.Dialect, table string, logger *slog.Logger) *http.ServeMux {
	t.Helper()
	dir := t.TempDir()
	adm, err := admin.New(db, dialect, table)
	if err != nil {
		t.Fatal(err)
	}
	readFile, writeFile := filepath.Join(dir, "read.tokens"), filepath.Join(dir, "write.tokens")
	for file, content := range map[string]string{readFile: "viewer:" + readToken + "\n", writeFile: "ops:" + writeToken + "\n"} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tokens, err := adminapi.LoadTokens(readFile, writeFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	api, err := adminapi.New(adminapi.Config{Admin: adm, Tokens: tokens, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	con, err := New(api, logger)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	con.Register(mux)
	return mux
}

// loginRequest is a same-origin login form post of token with next.
func loginRequest(token, next string) *http.Request {
	form := url.Values{"token": {token}, "next": {next}}
	r := httptest.NewRequest(http.MethodPost, "http://relay.test/console/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "http://relay.test")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	return r
}

// loginCookie logs token in through the login form and returns the cookie the console set.
func loginCookie(t *testing.T, mux http.Handler, token string) *http.Cookie {
	t.Helper()
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, loginRequest(token, ""))
	cookies := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("login: %d, cookies %v", w.Code, cookies)
	}
	return cookies[0]
}
