package faultinject

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// relays supervises several `outboxkit relay` processes like an orchestrator would: a process
// that exits is started again (after a short pause), and kill SIGKILLs one of them.
type relays struct {
	bin, config, logDir string

	mu        sync.Mutex
	procs     []*os.Process
	killed    []bool
	kills     int
	selfExits int
	starts    int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	rng    *rand.Rand
}

func startRelays(bin, config, logDir string, n int, seed uint64) *relays {
	ctx, cancel := context.WithCancel(context.Background())
	r := &relays{bin: bin, config: config, logDir: logDir, procs: make([]*os.Process, n), killed: make([]bool, n),
		ctx: ctx, cancel: cancel, rng: rand.New(rand.NewPCG(seed, 7))}
	for i := range n {
		r.wg.Add(1)
		go r.supervise(i)
	}
	return r
}

// supervise runs slot i's relay until stop, restarting it whenever it exits.
func (r *relays) supervise(i int) {
	defer r.wg.Done()
	logPath := filepath.Join(r.logDir, fmt.Sprintf("relay-%d.log", i))
	for r.ctx.Err() == nil {
		logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return
		}
		cmd := exec.Command(r.bin, "relay", "--config", r.config)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.Env = relayEnv()
		// Own process group: a Ctrl-C on the terminal reaches the supervisor, not the relays.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		r.mu.Lock()
		if r.ctx.Err() != nil {
			r.mu.Unlock()
			_ = logFile.Close()
			return
		}
		err = cmd.Start()
		if err == nil {
			r.procs[i], r.killed[i] = cmd.Process, false
			r.starts++
		}
		r.mu.Unlock()
		if err != nil {
			fmt.Fprintf(logFile, "faultinject: start: %v\n", err)
			_ = logFile.Close()
			r.pause(time.Second)
			continue
		}
		_ = cmd.Wait()
		_ = logFile.Close()
		r.mu.Lock()
		r.procs[i] = nil
		byUs := r.killed[i]
		if !byUs && r.ctx.Err() == nil {
			r.selfExits++
		}
		r.mu.Unlock()
		if byUs {
			r.pause(time.Duration(r.intn(400)) * time.Millisecond)
		} else {
			// Exited on its own (for example: the broker was down at its start): back off a
			// little, as a supervisor would.
			r.pause(time.Second)
		}
	}
}

func (r *relays) intn(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}

func (r *relays) pause(d time.Duration) {
	select {
	case <-time.After(d):
	case <-r.ctx.Done():
	}
}

// relayEnv is the environment without OUTBOXKIT_* variables: they override the configuration
// file (the test services' OUTBOXKIT_KAFKA_BROKERS would point the relays at the shared broker).
func relayEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTBOXKIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// kill SIGKILLs a random running relay, waiting up to 10 s for one to be running (a relay just
// killed may still be restarting); false if none came up.
func (r *relays) kill() bool {
	for range 100 {
		if r.killOne() {
			return true
		}
		r.pause(100 * time.Millisecond)
	}
	return false
}

func (r *relays) killOne() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var running []int
	for i, p := range r.procs {
		if p != nil && !r.killed[i] {
			running = append(running, i)
		}
	}
	if len(running) == 0 {
		return false
	}
	i := running[r.rng.IntN(len(running))]
	if err := r.procs[i].Signal(syscall.SIGKILL); err != nil {
		return false
	}
	r.killed[i] = true
	r.kills++
	return true
}

// stop sends SIGTERM to every relay (a clean shutdown), SIGKILL after grace, and waits.
func (r *relays) stop(grace time.Duration) {
	r.mu.Lock()
	r.cancel()
	for _, p := range r.procs {
		if p != nil {
			_ = p.Signal(syscall.SIGTERM)
		}
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		r.mu.Lock()
		for _, p := range r.procs {
			if p != nil {
				_ = p.Signal(syscall.SIGKILL)
			}
		}
		r.mu.Unlock()
		<-done
	}
}

func (r *relays) counts() (kills, selfExits, starts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kills, r.selfExits, r.starts
}
