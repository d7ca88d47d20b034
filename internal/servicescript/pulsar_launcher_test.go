package servicescript

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// pulsarClasspath returns the shared Pulsar's classpath, resolved by scripts/services.sh.
func pulsarClasspath(t *testing.T) string {
	t.Helper()
	state := Env("SERVICES_STATE_DIR", "/var/tmp/outboxkit-services")
	cp, err := os.ReadFile(filepath.Join(state, "pulsar", "classpath"))
	if err != nil {
		testsupport.Unavailable(t, "Pulsar's classpath (scripts/services.sh up resolves it)", err)
	}
	return strings.TrimSpace(string(cp))
}

// jdkTool returns the JDK's program name (java, javac) of the JDK scripts/services.sh starts
// Pulsar with: $JAVA_HOME's, else Debian's Java 17.
func jdkTool(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(Env("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64"), "bin", name)
	if _, err := os.Stat(path); err != nil {
		testsupport.Unavailable(t, "the JDK's "+name, err)
	}
	return path
}

// javaTimeout bounds one javac or JVM run of these tests.
const javaTimeout = 2 * time.Minute

// schemaRace runs testdata/SchemaRace.java (compiled into dir) with mode, in a JVM of its own, and
// returns what it printed: "deadlock" or "ok".
func schemaRace(t *testing.T, classpath, dir, mode string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), javaTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, jdkTool(t, "java"), "-cp", classpath+":"+dir, "SchemaRace", mode).CombinedOutput()
	if err != nil {
		t.Fatalf("SchemaRace %s: %v: %s", mode, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPulsarLauncherPreventsTheSchemaDeadlock: Pulsar 4.0's client Schema classes deadlock when two
// threads initialize them at once, and a broker whose threads do so serves no topic again;
// scripts/services/pulsar/OutboxkitStandalone.java, the main class the services script starts
// the broker with, initializes them first. The race must deadlock without it (or this test proves
// nothing) and never with it.
func TestPulsarLauncherPreventsTheSchemaDeadlock(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles Java and runs up to six JVMs")
	}
	classpath := pulsarClasspath(t)
	s, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), javaTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, jdkTool(t, "javac"), "--release", "17", "-proc:none", "-nowarn", "-d", dir, "-cp", classpath,
		filepath.Join(s.Root, "scripts", "services", "pulsar", "OutboxkitStandalone.java"),
		filepath.Join("testdata", "SchemaRace.java")).CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v: %s", err, out)
	}

	const runs = 3
	deadlocked := false
	for i := 0; i < runs && !deadlocked; i++ {
		deadlocked = schemaRace(t, classpath, dir, "plain") == "deadlock"
	}
	if !deadlocked {
		t.Fatalf("the race did not deadlock in %d runs without the launcher's initialization: "+
			"the harness no longer shows the deadlock (or Pulsar's Schema classes no longer have it)", runs)
	}
	for i := range runs {
		if got := schemaRace(t, classpath, dir, "launcher"); got != "ok" {
			t.Fatalf("run %d with the launcher's initialization: %s", i+1, got)
		}
	}
}

// TestPulsarStartsThroughTheLauncher: the shared broker's JVM runs OutboxkitStandalone.
func TestPulsarStartsThroughTheLauncher(t *testing.T) {
	dir := filepath.Join(Env("SERVICES_STATE_DIR", "/var/tmp/outboxkit-services"), "pulsar")
	pid, err := os.ReadFile(filepath.Join(dir, "pulsar.pid"))
	if err != nil {
		testsupport.Unavailable(t, "the shared Pulsar (its pid file)", err)
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "cmdline"))
	if err != nil {
		testsupport.Unavailable(t, "the shared Pulsar (its process)", err)
	}
	if !strings.Contains(string(cmdline), dir+"/") {
		testsupport.Unavailable(t, "the shared Pulsar (its pid names another process)", nil)
	}
	args := strings.Split(string(cmdline), "\x00")
	for i, a := range args {
		if a == "-cp" && i+2 < len(args) {
			if args[i+2] != "OutboxkitStandalone" {
				t.Fatalf("the shared Pulsar runs main class %q, not OutboxkitStandalone "+
					"(started before scripts/services.sh used it? bash scripts/services.sh restart-pulsar)", args[i+2])
			}
			return
		}
	}
	t.Fatalf("the shared Pulsar's command line has no -cp: %.300q", args)
}
