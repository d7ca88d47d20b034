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

// schemaHarness compiles the broker's main class (scripts/services/pulsar/OutboxkitStandalone.java)
// and the test harnesses of testdata into a temporary directory, and returns it.
func schemaHarness(t *testing.T, classpath string) string {
	t.Helper()
	s, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), javaTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, jdkTool(t, "javac"), "--release", "17", "-proc:none", "-nowarn", "-d", dir, "-cp", classpath,
		filepath.Join(s.Root, "scripts", "services", "pulsar", "OutboxkitStandalone.java"),
		filepath.Join("testdata", "SchemaRace.java"), filepath.Join("testdata", "SchemaRaceForced.java")).CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v: %s", err, out)
	}
	return dir
}

// runJava runs the JVM with args, bounded by javaTimeout, and returns what it printed.
func runJava(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), javaTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, jdkTool(t, "java"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("java %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// forcedSchemaRace runs testdata/SchemaRaceForced.java with mode ("plain" or "launcher") and
// returns what it printed: "deadlock" or "ok".
func forcedSchemaRace(t *testing.T, classpath, dir, mode string) string {
	t.Helper()
	// Only the harness's directory on the JVM's classpath: SchemaRaceForced loads the launcher
	// (from the same directory) and Pulsar with a class loader of its own.
	return runJava(t, "-cp", dir, "SchemaRaceForced", mode, dir, classpath)
}

// TestPulsarLauncherPreventsTheSchemaDeadlock: Pulsar 4.0's client Schema classes deadlock when two
// threads initialize them at once, and a broker whose threads do so serves no topic again;
// scripts/services/pulsar/OutboxkitStandalone.java, the main class the services script starts
// the broker with, initializes them first. SchemaRaceForced holds one thread inside Schema's
// initializer until the other waits for it, so the interleaving that deadlocks happens on every
// run, not by chance: without the launcher it must deadlock (or this test proves nothing: the
// harness or Pulsar changed), and after the launcher's main has run up to Pulsar's own starter it
// must not.
//
// The unforced race (two threads started at once, as in the broker) is a soak test:
// TestSoakPulsarSchemaRace, run by scripts/soak.sh.
func TestPulsarLauncherPreventsTheSchemaDeadlock(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles Java and runs two JVMs")
	}
	classpath := pulsarClasspath(t)
	dir := schemaHarness(t, classpath)
	if got := forcedSchemaRace(t, classpath, dir, "plain"); got != "deadlock" {
		t.Fatalf("the forced race without the launcher printed %q, want deadlock: "+
			"the harness no longer shows the deadlock (or Pulsar's Schema classes no longer have it)", got)
	}
	if got := forcedSchemaRace(t, classpath, dir, "launcher"); got != "ok" {
		t.Fatalf("the forced race after OutboxkitStandalone.main printed %q, want ok", got)
	}
}

// TestSoakPulsarSchemaRace (soak only, scripts/soak.sh): the unforced race of SchemaRace.java,
// two threads initializing Schema and BytesSchema at once, as a broker's threads do. It reports
// how often the race deadlocked without the launcher's initialization (that depends on the
// threads' timing, hence not in the gate) and fails if it ever deadlocked with it.
func TestSoakPulsarSchemaRace(t *testing.T) {
	runs := testsupport.Soak(t, 20)
	classpath := pulsarClasspath(t)
	dir := schemaHarness(t, classpath)
	cp := classpath + ":" + dir
	deadlocks := map[string]int{}
	for _, mode := range []string{"plain", "launcher"} {
		for range runs {
			if runJava(t, "-cp", cp, "SchemaRace", mode) == "deadlock" {
				deadlocks[mode]++
			}
		}
	}
	t.Logf("soak: SchemaRace deadlocked in %d of %d runs without the launcher's initialization, %d of %d with it",
		deadlocks["plain"], runs, deadlocks["launcher"], runs)
	if deadlocks["launcher"] > 0 {
		t.Fatalf("the race deadlocked %d times in %d runs with the launcher's initialization", deadlocks["launcher"], runs)
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
