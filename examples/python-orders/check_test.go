package pythonorders_test

import (
	"database/sql"
	"os/exec"
	"testing"
	"time"
)

func runCLI(bin, dir string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, cleanEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// checkProcessed compares the consumer's processed-events table with what the service wrote:
// exactly the committed events, none rolled back, each order's versions applied as 1, 2, 3, ...
// up to the order's final version in the orders table.
func checkProcessed(t *testing.T, db *sql.DB, prefix string, w writeResult) {
	t.Helper()
	rows, err := db.Query(`SELECT event_id::text, order_id, version FROM ` + prefix + `processed_events ORDER BY applied`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	committed := map[string]written{}
	for _, c := range w.Committed {
		committed[c.EventID] = c
	}
	rolledBack := map[string]bool{}
	for _, r := range w.RolledBack {
		rolledBack[r.EventID] = true
	}
	applied := map[string]int{} // order -> last version applied
	seen := map[string]bool{}
	for rows.Next() {
		var id, order string
		var version int
		if err := rows.Scan(&id, &order, &version); err != nil {
			t.Fatal(err)
		}
		switch c, ok := committed[id]; {
		case rolledBack[id]:
			t.Errorf("phantom: event %s of order %s was rolled back and yet processed", id, order)
		case !ok:
			t.Errorf("event %s of order %s processed, but the service did not commit it", id, order)
		case c.OrderID != order || c.Version != version:
			t.Errorf("event %s processed as %s v%d, written as %s v%d", id, order, version, c.OrderID, c.Version)
		}
		if version != applied[order]+1 {
			t.Errorf("order %s: version %d applied after %d", order, version, applied[order])
		}
		applied[order] = version
		seen[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, c := range committed {
		if !seen[id] {
			t.Errorf("lost: committed event %s of order %s v%d was never processed", id, c.OrderID, c.Version)
		}
	}
	final := map[string]int{}
	orderRows, err := db.Query(`SELECT id, version FROM ` + prefix + `orders`)
	if err != nil {
		t.Fatal(err)
	}
	defer orderRows.Close()
	for orderRows.Next() {
		var id string
		var v int
		if err := orderRows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		final[id] = v
		if applied[id] != v {
			t.Errorf("order %s is at version %d in the orders table, its events reached version %d", id, v, applied[id])
		}
	}
	if len(final) != len(applied) {
		t.Errorf("%d orders in the orders table, events of %d applied", len(final), len(applied))
	}
}

// waitEmpty waits (a minute at most) until the relay has deleted every row of the outbox.
func waitEmpty(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	var n int
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Errorf("%d rows left in %s a minute after the events were consumed", n, table)
}
