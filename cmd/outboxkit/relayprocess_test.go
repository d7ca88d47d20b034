package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/outbox"
)

// relayProcess is a running `outboxkit relay` whose JSON log lines are collected.
type relayProcess struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []map[string]any
	raw   strings.Builder
	more  chan struct{} // signalled on every new line
	done  chan struct{} // closed when stderr is drained
}

// startRelay runs `outboxkit relay args` in dir with a clean environment and collects its log
// lines; the process is killed at the end of the test if it still runs.
func startRelay(t *testing.T, dir string, args ...string) *relayProcess {
	t.Helper()
	return startRelayWithEnv(t, dir, nil, args...)
}

// startRelayWithEnv is startRelay with extra environment entries. The relay logs on stderr
// only: anything on stdout fails the test.
func startRelayWithEnv(t *testing.T, dir string, env []string, args ...string) *relayProcess {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"relay"}, args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &relayProcess{cmd: cmd, more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			_ = json.Unmarshal(sc.Bytes(), &rec)
			p.mu.Lock()
			p.raw.WriteString(sc.Text() + "\n")
			if rec != nil {
				p.lines = append(p.lines, rec)
			}
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if stdout.Len() > 0 {
			t.Errorf("the relay printed on stdout: %s", stdout.String())
		}
	})
	return p
}

// waitLog returns the first log record whose msg is msg, waiting for it up to a minute (a
// bound against hangs, not a timing assertion).
func (p *relayProcess) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		p.mu.Lock()
		for _, rec := range p.lines {
			if rec["msg"] == msg {
				p.mu.Unlock()
				return rec
			}
		}
		p.mu.Unlock()
		select {
		case <-p.more:
		case <-p.done:
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("relay exited without logging %q; its log:\n%s", msg, p.raw.String())
		case <-deadline:
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("relay did not log %q within a minute; its log:\n%s", msg, p.raw.String())
		}
	}
}

func (p *relayProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

// stop sends SIGTERM and returns the exit code.
func (p *relayProcess) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return p.wait(t)
}

// wait waits for the process to exit (a minute at most) and returns its exit code.
func (p *relayProcess) wait(t *testing.T) int {
	t.Helper()
	waited := make(chan error, 1)
	go func() {
		<-p.done
		waited <- p.cmd.Wait()
	}()
	select {
	case err := <-waited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		t.Fatalf("relay did not exit within a minute; its log:\n%s", p.log())
		return -1
	}
}

// waitFor waits up to d for the process to exit and returns its exit code and whether it exited.
func (p *relayProcess) waitFor(d time.Duration) (int, bool) {
	waited := make(chan error, 1)
	go func() {
		<-p.done
		waited <- p.cmd.Wait()
	}()
	select {
	case err := <-waited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), true
		}
		return 0, err == nil
	case <-time.After(d):
		return -1, false
	}
}

// consume reads topic from the Kafka cluster at addrs until every id was seen (by the event_id
// header), and checks each message's key.
func consume(t *testing.T, addrs []string, topic string, ids []uuid.UUID) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	want := map[string]bool{}
	for _, id := range ids {
		want[id.String()] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(want) > 0 {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d events never reached topic %s: %v", len(want), topic, want)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if !strings.HasPrefix(string(r.Key), "order-") {
				t.Errorf("record key %q is not the aggregate id", r.Key)
			}
			for _, h := range r.Headers {
				if h.Key == outbox.MetadataEventID {
					delete(want, string(h.Value))
				}
			}
		})
	}
}
