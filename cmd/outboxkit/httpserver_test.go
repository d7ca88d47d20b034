package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/outbox"
)

// syncBuffer is a log destination the test reads while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testHTTP is the relay's HTTP server run in the test process, on an SQLite database of the
// test, migrated (the probes, the admin API and the console, no forwarder).
type testHTTP struct {
	addr  string
	admin string // the admin listener's address, when http.admin_listen is set
	log   *syncBuffer
	db    *sql.DB // the relay's pool
}

// startTestHTTP starts the relay's HTTP endpoints with httpSection (YAML lines under http:,
// besides listen) and the tokens "ops:"+writeToken and "viewer:"+readToken in token files,
// marked running.
func startTestHTTP(t *testing.T, database, httpSection string) *testHTTP {
	t.Helper()
	dir := t.TempDir()
	if database == "" {
		database = "  dialect: sqlite\n  dsn: " + filepath.Join(dir, "outbox.db") + "\n"
	}
	tokens, readTokens := filepath.Join(dir, "write.tokens"), filepath.Join(dir, "read.tokens")
	if err := os.WriteFile(tokens, []byte("ops:"+writeToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(readTokens, []byte("viewer:"+readToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := "  listen: 127.0.0.1:0\n"
	if strings.Contains(httpSection, "  listen:") {
		listen = ""
	}
	yaml := "database:\n" + database + "http:\n" + listen + "  admin_write_tokens_file: " + tokens + "\n  admin_read_tokens_file: " + readTokens + "\n" + httpSection
	cfg, err := relayconfig.Parse([]byte(yaml), nil, relayconfig.Options{})
	if err != nil {
		t.Fatalf("configuration:\n%s\n%v", yaml, err)
	}
	db, err := openDB(cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if cfg.Database.Dialect == outbox.SQLite {
		table, err := outbox.NewTable(cfg.Database.Dialect, cfg.Database.Table)
		if err != nil {
			t.Fatal(err)
		}
		if err := outbox.Migrate(context.Background(), db, table); err != nil {
			t.Fatal(err)
		}
	}
	var (
		running   atomic.Bool
		publisher atomic.Pointer[message.Publisher]
	)
	running.Store(true)
	h := &testHTTP{log: &syncBuffer{}, db: db}
	logger := slog.New(slog.NewJSONHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	stop, err := startRelayHTTP(cfg, db, newRegistry(), &running, &publisher, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	for _, line := range strings.Split(h.log.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "serving /metrics and /healthz" {
			h.addr, _ = rec["addr"].(string)
		}
		if rec["msg"] == "serving the admin API and console" {
			h.admin, _ = rec["addr"].(string)
		}
	}
	if h.addr == "" {
		t.Fatalf("no listening address in the log:\n%s", h.log.String())
	}
	return h
}

// clientBound is how long a test client waits for the server to end a connection: twenty times
// the timeouts the tests configure (1s), so only a server without the timeout reaches it.
const clientBound = 20 * time.Second

// waitClosed reads conn until the server closes it, and fails when it is still open after
// clientBound.
func waitClosed(t *testing.T, conn net.Conn, rd io.Reader, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(clientBound))
	_, err := io.Copy(io.Discard, rd)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: the server still holds the connection after %s", what, clientBound)
	}
}

// The server ends a client that sends a body slower than http.read_timeout, and a keep-alive
// connection idle longer than http.idle_timeout.
func TestServerTimeoutsEndSlowAndIdleClients(t *testing.T) {
	t.Parallel()
	h := startTestHTTP(t, "", "  read_timeout: 1s\n  write_timeout: 5s\n  idle_timeout: 1s\n")
	conn, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A login form announced as 1000 bytes, of which 10 come.
	fmt.Fprintf(conn, "POST /console/login HTTP/1.1\r\nHost: %s\r\nOrigin: http://%s\r\n"+
		"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ntoken=abcd", h.addr, h.addr)
	waitClosed(t, conn, conn, "a slow login body")

	// A read timeout longer than the client's bound, so that only http.idle_timeout can end the
	// idle connection (net/http falls back to the read timeout when the idle timeout is zero).
	h = startTestHTTP(t, "", "  read_timeout: 1m\n  write_timeout: 5s\n  idle_timeout: 1s\n")
	idle, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET /livez HTTP/1.1\r\nHost: %s\r\n\r\n", h.addr)
	rd := bufio.NewReader(idle)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /livez: %d, close %v", resp.StatusCode, resp.Close)
	}
	waitClosed(t, idle, rd, "an idle keep-alive connection")
}
