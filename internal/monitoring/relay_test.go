package monitoring

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// relayProcess is one `outboxkit relay` process of a test, with its log.
type relayProcess struct {
	addr, logPath string
	cmd           *exec.Cmd
	done          chan struct{}
}

// startRelay writes config to dir and runs `bin relay --config` on it; the relay serves its
// metrics on addr. It returns once /healthz answers 200, and is killed at the end of the test.
func startRelay(t *testing.T, ctx context.Context, bin, dir, addr string, config map[string]any) *relayProcess {
	t.Helper()
	data, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, "relay.yaml")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r := &relayProcess{addr: addr, logPath: filepath.Join(dir, "relay.log"), done: make(chan struct{})}
	logFile, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "relay", "--config", configPath)
	r.cmd.Env = withoutOutboxkitVariables(os.Environ())
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if err := r.cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("start relay: %v", err)
	}
	go func() {
		_ = r.cmd.Wait()
		_ = logFile.Close()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("relay log (%s):\n%s", r.logPath, tail(r.logPath, 40))
		}
	})
	client := http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		select {
		case <-r.done:
			t.Fatalf("the relay exited before it was healthy (%s):\n%s", r.cmd.ProcessState, tail(r.logPath, 40))
		case <-ctx.Done():
			t.Fatalf("the relay was not healthy on %s: %v\n%s", addr, ctx.Err(), tail(r.logPath, 40))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// withoutOutboxkitVariables drops the OUTBOXKIT_* variables from env: the relay reads them as
// overrides of its configuration (the test services' OUTBOXKIT_KAFKA_BROKERS would point it at
// the shared Kafka instead of the dedicated one this test stops).
func withoutOutboxkitVariables(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "OUTBOXKIT_") {
			out = append(out, kv)
		}
	}
	return out
}

// kill SIGKILLs the relay (a crash, as far as Prometheus can tell) and waits for it to exit.
func (r *relayProcess) kill() {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

// tail returns the last n lines of a file, or why it cannot.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
