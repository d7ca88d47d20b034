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
// that exits is started again (after a short pause), kill SIGKILLs one of them, sigstop and
// sigcont pause and resume one. Every start gets a relay id of its own (relay_id in its
// configuration, "fault-<slot>-<start>", after the installation's prefix when the run has
// several), so the leases table says which process owns what.
type relays struct {
	bin, logDir, idPrefix string
	// writeConfig writes the configuration of one start of a relay to path.
	writeConfig func(path, relayID string) error

	mu        sync.Mutex
	procs     []*os.Process
	ids       []string // relay id of each slot's current process
	killed    []bool
	paused    []bool
	slotRuns  []int
	kills     int
	selfExits int
	starts    int
	pauses    int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	rng    *rand.Rand
}

func startRelays(bin, logDir, idPrefix string, n int, seed uint64, writeConfig func(path, relayID string) error) *relays {
	ctx, cancel := context.WithCancel(context.Background())
	r := &relays{bin: bin, logDir: logDir, idPrefix: idPrefix, writeConfig: writeConfig,
		procs: make([]*os.Process, n), ids: make([]string, n), killed: make([]bool, n), paused: make([]bool, n),
		slotRuns: make([]int, n), ctx: ctx, cancel: cancel, rng: rand.New(rand.NewPCG(seed, 7))}
	for i := range n {
		r.wg.Add(1)
		go r.supervise(i)
	}
	return r
}

// logPaths returns the log file of every slot (each holds the output of all its starts).
func (r *relays) logPaths() []string {
	paths := make([]string, len(r.procs))
	for i := range paths {
		paths[i] = filepath.Join(r.logDir, fmt.Sprintf("relay-%d.log", i))
	}
	return paths
}

// supervise runs slot i's relay until stop, restarting it whenever it exits.
func (r *relays) supervise(i int) {
	defer r.wg.Done()
	logPath := r.logPaths()[i]
	configPath := filepath.Join(r.logDir, fmt.Sprintf("relay-%d.yaml", i))
	for r.ctx.Err() == nil {
		logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return
		}
		r.mu.Lock()
		r.slotRuns[i]++
		id := fmt.Sprintf("fault-%s%d-%d", r.idPrefix, i, r.slotRuns[i])
		r.mu.Unlock()
		if err := r.writeConfig(configPath, id); err != nil {
			fmt.Fprintf(logFile, "faultinject: write config: %v\n", err)
			_ = logFile.Close()
			return
		}
		cmd := exec.Command(r.bin, "relay", "--config", configPath)
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
			r.procs[i], r.ids[i], r.killed[i], r.paused[i] = cmd.Process, id, false, false
			r.starts++
		}
		r.mu.Unlock()
		if err != nil {
			fmt.Fprintf(logFile, "faultinject: start: %v\n", err)
			_ = logFile.Close()
			r.sleep(time.Second)
			continue
		}
		_ = cmd.Wait()
		_ = logFile.Close()
		r.mu.Lock()
		r.procs[i], r.ids[i], r.paused[i] = nil, "", false
		byUs := r.killed[i]
		if !byUs && r.ctx.Err() == nil {
			r.selfExits++
		}
		r.mu.Unlock()
		if byUs {
			r.sleep(time.Duration(r.intn(400)) * time.Millisecond)
		} else {
			// Exited on its own (for example: the broker was down at its start): back off a
			// little, as a supervisor would.
			r.sleep(time.Second)
		}
	}
}

func (r *relays) intn(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}

func (r *relays) sleep(d time.Duration) {
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

// running returns the slots whose relay runs and is neither killed nor paused.
func (r *relays) running() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runningLocked()
}

func (r *relays) runningLocked() []int {
	var running []int
	for i, p := range r.procs {
		if p != nil && !r.killed[i] && !r.paused[i] {
			running = append(running, i)
		}
	}
	return running
}

// relayID returns the relay id of slot i's current process ("" if none runs) and its pid.
func (r *relays) relayID(i int) (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs[i] == nil {
		return "", 0
	}
	return r.ids[i], r.procs[i].Pid
}

// pids returns the process ids of every live relay, paused ones included.
func (r *relays) pids() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pids []int
	for _, p := range r.procs {
		if p != nil {
			pids = append(pids, p.Pid)
		}
	}
	return pids
}

// kill SIGKILLs a random running relay (never a paused one), waiting up to 10 s for one to be
// running (a relay just killed may still be restarting); false if none came up.
func (r *relays) kill() bool {
	for range 100 {
		if r.killOne() {
			return true
		}
		r.sleep(100 * time.Millisecond)
	}
	return false
}

func (r *relays) killOne() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	running := r.runningLocked()
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

// sigstop pauses slot i's relay with SIGSTOP; it returns the relay id of the paused process,
// or false if the slot has no running relay.
func (r *relays) sigstop(i int) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[i]
	if p == nil || r.killed[i] || r.paused[i] {
		return "", false
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return "", false
	}
	r.paused[i] = true
	r.pauses++
	return r.ids[i], true
}

// sigcont resumes slot i's relay if it is paused.
func (r *relays) sigcont(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[i]; p != nil && r.paused[i] {
		_ = p.Signal(syscall.SIGCONT)
		r.paused[i] = false
	}
}

// stop resumes paused relays, sends SIGTERM to every relay (a clean shutdown), SIGKILL after
// grace, and waits.
func (r *relays) stop(grace time.Duration) {
	r.mu.Lock()
	r.cancel()
	for i, p := range r.procs {
		if p != nil {
			if r.paused[i] {
				_ = p.Signal(syscall.SIGCONT)
				r.paused[i] = false
			}
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

func (r *relays) counts() (kills, selfExits, starts, pauses int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kills, r.selfExits, r.starts, r.pauses
}
