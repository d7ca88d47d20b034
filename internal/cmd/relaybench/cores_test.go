package main

import (
	"math"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestCoresBetween(t *testing.T) {
	before := procTimes{
		1: {user: "kafka", ticks: 1000, start: 7},
		2: {user: "relay", ticks: 50, start: 9},
		3: {user: "postgres", ticks: 70, start: 3}, // ends during the drain
		4: {user: "other", ticks: 900, start: 5},   // its pid is reused by a new process
	}
	after := procTimes{
		1: {user: "kafka", ticks: 1150, start: 7},
		2: {user: "relay", ticks: 250, start: 9},
		4: {user: "other", ticks: 1000, start: 400},   // the new process: counted whole
		5: {user: "walsender", ticks: 40, start: 410}, // started during the drain: counted whole
	}
	got := coresBetween(before, after, 2*time.Second)
	want := map[string]float64{"kafka": 0.75, "relay": 1.0, "walsender": 0.2, "other": 5.0}
	for u, w := range want {
		if math.Abs(got[u]-w) > 1e-9 {
			t.Errorf("%s: %.3f cores, want %.3f", u, got[u], w)
		}
	}
	if got["postgres"] != 0 {
		t.Errorf("a process that ended during the drain was counted: %v", got)
	}
	if coresBetween(nil, after, time.Second) != nil {
		t.Error("no reading before the drain must give no cores")
	}
}

// The reading finds this process and the relay child by pid, and counts this process's CPU.
func TestReadProcTimesNamesTheRelayAndTheBench(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	self := os.Getpid()
	before := readProcTimes(os.Getppid())
	// Spin until the kernel has counted 100 ms of CPU time to this process (getrusage), however
	// long that takes on a loaded machine: a wall-clock spin may get no CPU at all.
	spent := cpuTime(t)
	for start := time.Now(); cpuTime(t)-spent < 100*time.Millisecond; {
		if time.Since(start) > 2*time.Minute { // a bound against a hang, not a speed check
			t.Fatal("the process got less than 100 ms of CPU in 2 minutes of spinning")
		}
	}
	after := readProcTimes(os.Getppid())
	if after[self].user != "relaybench" || after[os.Getppid()].user != "relay" {
		t.Fatalf("self is %q, the given relay pid %q", after[self].user, after[os.Getppid()].user)
	}
	if after[self].ticks <= before[self].ticks {
		t.Errorf("100 ms of CPU time added no CPU ticks to this process (%d, then %d)", before[self].ticks, after[self].ticks)
	}
}

// cpuTime is the user and system CPU time the kernel counted to this process.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		t.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
