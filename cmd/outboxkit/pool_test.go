package main

import (
	"context"
	"database/sql"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// readyzCallers is how many /readyz requests the pool test sends at once.
const readyzCallers = 24

// The relay's pool is capped (database.max_open_conns, with a default), and readyzCallers
// concurrent /readyz requests never raise PostgreSQL's count of the relay's connections
// (pg_stat_activity by application_name) past the cap: the test holds every connection of the
// pool, sends the requests, waits until each waits for a connection (the pool's WaitCount), counts,
// then lets them through and counts again.
func TestReadyzNeverOpensMoreConnectionsThanThePoolCap(t *testing.T) {
	t.Parallel()
	dsn := testsupport.PostgresDSN(t)
	counter := testsupport.OpenPostgres(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for _, c := range []struct{ name, extra string }{{"default", ""}, {"configured", "  max_open_conns: 3\n"}} {
		t.Run(c.name, func(t *testing.T) {
			app := testsupport.UniqueName("readyz_" + c.name)
			h := startTestHTTP(t, "  dialect: postgres\n  dsn: "+dsn+sep+"application_name="+app+"\n"+c.extra, "")
			limit := h.db.Stats().MaxOpenConnections
			if limit == 0 {
				t.Errorf("the relay's pool has no cap (MaxOpenConnections 0)")
				limit = 4 // hold as many as a capped pool would, to show what the requests do
			}
			if c.extra != "" && limit != 3 {
				t.Errorf("database.max_open_conns 3: the pool's cap is %d", limit)
			}
			countConns := func() int {
				return count(t, counter, "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1", app)
			}
			ctx := context.Background()
			held := make([]*sql.Conn, limit)
			for i := range held {
				conn, err := h.db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := conn.PingContext(ctx); err != nil {
					t.Fatal(err)
				}
				held[i] = conn
			}
			var wg sync.WaitGroup
			client := &http.Client{Timeout: time.Minute}
			for range readyzCallers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if resp, err := client.Get("http://" + h.addr + "/readyz"); err == nil {
						_ = resp.Body.Close()
					}
				}()
			}
			// Every request either waits for a connection of the pool or, without a cap, opens one of
			// its own and finishes: wait for either, bounded against a hang.
			finished := make(chan struct{})
			go func() { wg.Wait(); close(finished) }()
			maxSeen := 0
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				maxSeen = max(maxSeen, countConns())
				waiting := h.db.Stats().WaitCount >= readyzCallers
				done := false
				select {
				case <-finished:
					done = true
				default:
				}
				if waiting || done {
					break
				}
			}
			maxSeen = max(maxSeen, countConns())
			for _, conn := range held {
				_ = conn.Close()
			}
			wg.Wait()
			maxSeen = max(maxSeen, countConns())
			if maxSeen > limit {
				t.Errorf("%d concurrent /readyz: PostgreSQL counted up to %d connections of the relay, more than the pool's %d",
					readyzCallers, maxSeen, limit)
			}
			t.Logf("%d concurrent /readyz: at most %d connections of the relay (cap %d)", readyzCallers, maxSeen, limit)
		})
	}
}
