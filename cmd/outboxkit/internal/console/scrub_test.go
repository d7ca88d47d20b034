package console

import (
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/outboxkit/outboxkit/outbox"
)

// lockedBuffer is a log destination safe for the handlers' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A database error reaches the API's and the console's clients without the database's address,
// user or password (it names neither host, port nor credentials), and the relay's log keeps it
// whole. The database is a PostgreSQL address where nothing listens: the driver's real error.
func TestErrorsReachClientsWithoutAddressesOrCredentials(t *testing.T) {
	const dsn = "postgres://dbadmin:hunter2-pass@127.0.0.1:1/orders?sslmode=disable&connect_timeout=5"
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	log := &lockedBuffer{}
	mux := newTestConsoleOn(t, db, outbox.Postgres, outbox.DefaultTable, slog.New(slog.NewTextHandler(log, nil)))
	cookie := loginCookie(t, mux, readToken)
	leaks := []string{"127.0.0.1", ":1 ", ":1)", "dbadmin", "hunter2", "orders"}
	for _, path := range []string{"/api/v1/backlog", "/api/v1/dead-letters", "/console/backlog", "/console/dead-letters"} {
		r := httptest.NewRequest(http.MethodGet, "http://relay.test"+path, nil)
		r.Header.Set("Authorization", "Bearer "+readToken)
		r.AddCookie(cookie)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		body := w.Body.String()
		if w.Code != http.StatusInternalServerError {
			t.Errorf("%s: %d, want 500", path, w.Code)
		}
		for _, leak := range leaks {
			if strings.Contains(body, leak) {
				i := strings.Index(body, leak)
				t.Errorf("%s: the answer holds %q: …%s…", path, leak, body[max(0, i-120):min(len(body), i+80)])
			}
		}
	}
	if !strings.Contains(log.String(), "127.0.0.1:1") {
		t.Errorf("the relay's log lost the database's address:\n%s", log.String())
	}
}
