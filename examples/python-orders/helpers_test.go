package pythonorders_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// pythonEnv makes (or finds) the example's virtual environment with scripts/python-env.sh and
// returns its python. Without python3, its venv module or PyPI the test is skipped, and fails
// under CI=true.
func pythonEnv(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("bash", "../../scripts/python-env.sh")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		testsupport.Unavailable(t, "the Python environment (scripts/python-env.sh)", fmtErr(err, stderr.String()))
	}
	python := filepath.Join(strings.TrimSpace(string(out)), "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("scripts/python-env.sh printed %q, which has no bin/python: %v", out, err)
	}
	return python
}

type cmdError struct {
	err    error
	stderr string
}

func (e cmdError) Error() string { return e.err.Error() + ": " + e.stderr }

func fmtErr(err error, stderr string) error { return cmdError{err: err, stderr: stderr} }

// runPython runs one of the example's scripts to completion and decodes the JSON object it prints.
func runPython(t *testing.T, python string, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(python, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1") // no __pycache__ in the source tree
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if out == nil {
		return
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("python %s printed no JSON result (%v):\n%s\nstderr:\n%s", args[0], err, stdout.String(), stderr.String())
	}
}

// cliDir holds the outboxkit command, built once by buildCLI and removed by TestMain.
var (
	cliDir   string
	cliOnce  sync.Once
	cliErr   error
	cliBuild []byte
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cliDir != "" {
		_ = os.RemoveAll(cliDir)
	}
	os.Exit(code)
}

// buildCLI builds the outboxkit command once for the test binary and returns its path.
func buildCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		if cliDir, cliErr = os.MkdirTemp("", "python-orders-cli"); cliErr != nil {
			return
		}
		cliBuild, cliErr = exec.Command("go", "build", "-o", filepath.Join(cliDir, "outboxkit"), "../../cmd/outboxkit").CombinedOutput()
	})
	if cliErr != nil {
		t.Fatalf("go build ./cmd/outboxkit: %v\n%s", cliErr, cliBuild)
	}
	return filepath.Join(cliDir, "outboxkit")
}

// cleanEnv is the environment without OUTBOXKIT_* variables, so the configuration file decides.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTBOXKIT_") {
			out = append(out, kv)
		}
	}
	return out
}

// relay is a running `outboxkit relay`.
type relay struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	log bytes.Buffer
}

func (r *relay) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.Write(p)
}

func (r *relay) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

func startRelay(t *testing.T, bin, dir string) *relay {
	t.Helper()
	r := &relay{cmd: exec.Command(bin, "relay")}
	r.cmd.Dir, r.cmd.Env = dir, cleanEnv()
	r.cmd.Stdout, r.cmd.Stderr = r, r
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
	})
	return r
}

// stop sends SIGTERM and fails the test unless the relay exits 0 within a minute.
func (r *relay) stop(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("relay exited with %v after SIGTERM; its log:\n%s", err, r)
		}
	case <-time.After(time.Minute):
		_ = r.cmd.Process.Kill()
		t.Errorf("relay did not stop within a minute of SIGTERM; its log:\n%s", r)
	}
}

// dropPrefixed drops, when the test ends, every table and function whose name starts with prefix.
func dropPrefixed(t *testing.T, db *sql.DB, prefix string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, q := range []string{
			`SELECT 'DROP TABLE IF EXISTS ' || quote_ident(tablename) || ' CASCADE' FROM pg_tables
			 WHERE schemaname = current_schema() AND starts_with(tablename, $1)`,
			`SELECT 'DROP FUNCTION IF EXISTS ' || p.oid::regprocedure || ' CASCADE' FROM pg_proc p
			 JOIN pg_namespace n ON n.oid = p.pronamespace
			 WHERE n.nspname = current_schema() AND starts_with(p.proname, $1)`,
		} {
			rows, err := db.QueryContext(ctx, q, prefix)
			if err != nil {
				t.Logf("cleanup of %s*: %v", prefix, err)
				return
			}
			var stmts []string
			for rows.Next() {
				var s string
				if rows.Scan(&s) == nil {
					stmts = append(stmts, s)
				}
			}
			rows.Close()
			for _, s := range stmts {
				_, _ = db.ExecContext(ctx, s)
			}
		}
	})
}
