package testsupport

import (
	"os"
	"strconv"
	"testing"
)

// Environment variables of the soak tests (scripts/soak.sh sets them).
const (
	// EnvSoak set to 1 runs the soak tests; the gate (scripts/test.sh) leaves it unset.
	EnvSoak = "OUTBOXKIT_SOAK"
	// EnvSoakRuns overrides how many times a soak test repeats what it measures.
	EnvSoakRuns = "OUTBOXKIT_SOAK_RUNS"
)

// Soak skips t unless OUTBOXKIT_SOAK=1, and returns how many runs it should make: OUTBOXKIT_SOAK_RUNS,
// else def. A soak test checks what depends on timing or on a race happening (how often a race
// shows, how long something takes under load); such a check cannot pass or fail the gate
// deterministically, so it runs only from scripts/soak.sh, which reports what it measured.
func Soak(t testing.TB, def int) int {
	t.Helper()
	if os.Getenv(EnvSoak) != "1" {
		t.Skipf("a soak test: it depends on timing, so it runs only from scripts/soak.sh (%s=1)", EnvSoak)
	}
	v := os.Getenv(EnvSoakRuns)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s is %q, want a whole number of runs of at least 1", EnvSoakRuns, v)
	}
	return n
}
