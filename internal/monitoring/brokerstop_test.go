package monitoring

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/faultinject"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// brokerStopRun is what the tests that stop a dedicated Kafka under a running relay start from.
type brokerStopRun struct {
	db     *sql.DB
	dsn    string
	bin    string // the outboxkit binary
	dir    string // the test's directory (the binary, the relay's configuration and log)
	broker faultinject.Broker
	table  outbox.Table
	name   string // the table's unique name: the table label of its metrics
	topic  string // the topic its events go to
}

// setUpBrokerStop builds outboxkit while a dedicated Kafka (state in stateDir, on port and
// controllerPort) starts, and creates a PostgreSQL outbox table named after prefix. Kafka is
// stopped and the table dropped at the end of the test; a Kafka that cannot start is
// testsupport.Unavailable. logf reports the steps.
func setUpBrokerStop(t *testing.T, ctx context.Context, stateDir string, port, controllerPort int, prefix string,
	logf func(format string, args ...any)) brokerStopRun {
	t.Helper()
	run := brokerStopRun{dsn: testsupport.PostgresDSN(t), db: testsupport.OpenPostgres(t), dir: t.TempDir()}
	root := repoRoot(t)
	type built struct {
		bin string
		err error
	}
	build := make(chan built, 1)
	go func() {
		bin, err := faultinject.BuildCLI(ctx, root, run.dir)
		build <- built{bin, err}
	}()
	run.broker = faultinject.Broker{Kind: faultinject.Kafka, RepoRoot: root, StateDir: stateDir,
		KafkaPort: port, KafkaControllerPort: controllerPort}
	logf("starting the dedicated Kafka on %s (state %s) and building outboxkit", run.broker.Addr(), stateDir)
	if err := run.broker.Start(ctx); err != nil {
		<-build
		testsupport.Unavailable(t, "dedicated Kafka", err)
	}
	logf("Kafka ready")
	t.Cleanup(func() {
		if err := run.broker.Stop(context.Background()); err != nil {
			t.Errorf("stop the dedicated Kafka: %v", err)
		}
	})

	run.name = testsupport.UniqueName(prefix)
	table, err := outbox.NewTable(outbox.Postgres, run.name)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, run.db, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	t.Cleanup(func() {
		for _, tbl := range []string{table.Events(), table.Leases(), table.Relays(), table.KeyLocks(), table.Migrations()} {
			if _, err := run.db.Exec("DROP TABLE IF EXISTS " + tbl); err != nil {
				t.Errorf("drop %s: %v", tbl, err)
			}
		}
	})
	run.table = table

	b := <-build
	if b.err != nil {
		t.Fatal(b.err)
	}
	logf("outboxkit built")
	run.bin = b.bin
	run.topic = strings.ReplaceAll(run.name, "_", "-")
	return run
}

// relayConfig is the configuration of a relay of the run's table to its Kafka, serving its
// metrics on addr, with the given forwarder section.
func (r brokerStopRun) relayConfig(addr string, forwarder map[string]any) map[string]any {
	return map[string]any{
		"database":  map[string]any{"dialect": "postgres", "dsn": r.dsn, "table": r.table.Events()},
		"forwarder": forwarder,
		"http":      map[string]any{"listen": addr},
		"log":       map[string]any{"level": "info"},
		"broker":    "kafka",
		"kafka":     map[string]any{"brokers": []string{r.broker.Addr()}},
	}
}
