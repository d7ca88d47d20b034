package console

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/outboxkit/outboxkit/outbox"
)

// Console logins and logouts are audited whatever the log level, with the token's name and the
// client's address.
func TestConsoleLoginAndLogoutAreAudited(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	table, _ := outbox.NewTable(outbox.SQLite, outbox.DefaultTable)
	if err := outbox.Migrate(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	mux := newTestConsoleOn(t, db, outbox.SQLite, outbox.DefaultTable, slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelError})))
	req := loginRequest(writeToken, "")
	req.RemoteAddr = "192.0.2.44:7000"
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	cookie := w.Result().Cookies()[0]
	out := httptest.NewRequest(http.MethodPost, "http://relay.test/console/logout", nil)
	out.RemoteAddr = "192.0.2.44:7000"
	out.AddCookie(cookie)
	mux.ServeHTTP(httptest.NewRecorder(), out)
	for _, msg := range []string{"console login", "console logout"} {
		lines := auditLines(log.String(), msg)
		if len(lines) != 1 || lines[0]["who"] != "ops" || lines[0]["remote"] != "192.0.2.44:7000" || lines[0]["audit"] != true {
			t.Errorf("%s at log level error: %v; log:\n%s", msg, lines, log.String())
		}
	}
}
