package servicescript

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// pidfileShell runs script with scripts/services/pidfile.sh sourced, and returns its exit code.
func pidfileShell(t *testing.T, script string, args ...string) int {
	t.Helper()
	s, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(s.Root, "scripts", "services", "pidfile.sh")
	// In the callers' mode (scripts/services.sh runs with set -euo pipefail).
	cmd := exec.Command("bash", append([]string{"-c", "set -euo pipefail; source \"$0\"; " + script, lib}, args...)...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return 0
	}
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode()
	}
	t.Fatalf("bash: %v: %s", err, out)
	return -1
}

// process is a child of the test, reaped as soon as it exits (a zombie would still answer kill -0).
type process struct {
	pid    int
	exited chan struct{}
}

// startProcess starts a long sleep, under sh -c when marker is not empty so that marker is on its
// command line, and stops it at the end of the test.
func startProcess(t *testing.T, marker string) process {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if marker != "" {
		// The shell ends its sleep when it is terminated (it would outlive it otherwise).
		cmd = exec.Command("sh", "-c", "trap 'kill $!; exit 143' TERM; sleep 300 & wait", marker)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := process{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL) // its process group: the shell and its sleep
		<-p.exited
	})
	return p
}

// exitsWithin reports whether p exits within d.
func (p process) exitsWithin(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

func writePidfile(t *testing.T, dir string, pid int) string {
	t.Helper()
	file := filepath.Join(dir, "broker.pid")
	if err := os.WriteFile(file, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// A pid file left behind by a broker that was killed names a number that the system may since
// have given to an unrelated process (a CI run on a rebooted machine hit this: the secure Pulsar
// was taken for running and never started). Such a file means killed uncleanly, and stopping it
// must leave the unrelated process alone.
func TestPidfileOfAReusedPidIsNotTheService(t *testing.T) {
	dir := t.TempDir()
	other := startProcess(t, "")
	file := writePidfile(t, dir, other.pid)

	if code := pidfileShell(t, `killed_uncleanly "$1"`, file); code != 0 {
		t.Errorf("killed_uncleanly on a pid file naming an unrelated live process (pid %d) = exit %d, want 0 (true)", other.pid, code)
	}
	if code := pidfileShell(t, `stop_pidfile "$1"`, file); code != 0 {
		t.Errorf("stop_pidfile = exit %d, want 0", code)
	}
	if other.exitsWithin(200 * time.Millisecond) {
		t.Errorf("stop_pidfile killed pid %d, an unrelated process", other.pid)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("stop_pidfile removed the pid file of a service it did not stop (the next start must know it was killed): %v", err)
	}
}

// The service's own process (its command line names the pid file's directory) is running, not
// killed, and stop_pidfile stops it and removes its file.
func TestPidfileOfTheServiceStopsIt(t *testing.T) {
	dir := t.TempDir()
	own := startProcess(t, filepath.Join(dir, "server.properties"))
	file := writePidfile(t, dir, own.pid)

	if code := pidfileShell(t, `killed_uncleanly "$1"`, file); code == 0 {
		t.Errorf("killed_uncleanly on the live service (pid %d) = true, want false", own.pid)
	}
	if code := pidfileShell(t, `stop_pidfile "$1"`, file); code != 0 {
		t.Errorf("stop_pidfile = exit %d, want 0", code)
	}
	if !own.exitsWithin(10 * time.Second) {
		t.Errorf("stop_pidfile left the service (pid %d) running", own.pid)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("stop_pidfile kept the pid file of the service it stopped: %v", err)
	}
}

// A pid file naming a process that is gone means killed uncleanly; no file means stopped cleanly,
// and an empty one that a starter is writing it.
func TestPidfileOfAGoneProcess(t *testing.T) {
	dir := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	file := writePidfile(t, dir, gone.Process.Pid)
	if code := pidfileShell(t, `killed_uncleanly "$1"`, file); code != 0 {
		t.Errorf("killed_uncleanly on a gone pid = exit %d, want 0 (true)", code)
	}
	if code := pidfileShell(t, `killed_uncleanly "$1"`, filepath.Join(dir, "none.pid")); code == 0 {
		t.Error("killed_uncleanly without a pid file = true, want false")
	}
	empty := filepath.Join(dir, "empty.pid") // a starter between creating the file and writing it
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := pidfileShell(t, `killed_uncleanly "$1"`, empty); code == 0 {
		t.Error("killed_uncleanly on an empty pid file = true, want false")
	}
}
