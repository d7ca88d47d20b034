package gatescript

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runSteps runs body, a bash script, after sourcing scripts/lib/steps.sh with set -euo pipefail
// (as scripts/test.sh does), and returns its output and exit code.
func runSteps(t *testing.T, body string) (string, int) {
	t.Helper()
	lib, err := filepath.Abs(filepath.Join("..", "..", "scripts", "lib", "steps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lib); err != nil {
		t.Fatal(err)
	}
	script := "set -euo pipefail\nsource " + lib + "\n" + body
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", "-c", script).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	default:
		t.Fatalf("bash: %v: %s", err, out)
		return "", 0
	}
}

// summaryLine matches the summary's line of step name with status.
func summaryLine(status, name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(status) + `\s+[0-9]+s  ` + regexp.QuoteMeta(name) + `$`)
}

// TestStepsRunEveryStepAndFailAtTheEnd: failing steps (a failing program, a function failing at
// its first command, a failing pipeline, an exit) neither stop the steps after them nor pass; the
// summary lists every step in order with its status and seconds, and the run exits 1.
func TestStepsRunEveryStepAndFailAtTheEnd(t *testing.T) {
	out, code := runSteps(t, `
half() { false; echo "half went on after its failing command"; }
piped() { false | cat; }
step "passes" true
step "fails" false
step "a function" half
step "a pipeline" piped
step "exits" exit 3
step "runs after the failures" echo "the last step ran"
steps_summary
echo "the caller went on after a failed summary"
`)
	if code != 1 {
		t.Errorf("exit code %d, want 1; output:\n%s", code, out)
	}
	for _, want := range []string{"the last step ran", "=== 4 of 6 steps failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"half went on", "the caller went on"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("output has %q:\n%s", unwanted, out)
		}
	}
	steps := []struct{ status, name string }{
		{"ok", "passes"}, {"FAIL", "fails"}, {"FAIL", "a function"}, {"FAIL", "a pipeline"},
		{"FAIL", "exits"}, {"ok", "runs after the failures"},
	}
	summary := out[strings.Index(out, "=== summary"):]
	last := 0
	for _, s := range steps {
		loc := summaryLine(s.status, s.name).FindStringIndex(summary)
		if loc == nil {
			t.Fatalf("the summary has no line %q for step %q:\n%s", s.status, s.name, summary)
		}
		if loc[0] < last {
			t.Errorf("step %q is out of order in the summary:\n%s", s.name, summary)
		}
		last = loc[0]
	}
}

// TestStepsPassWhenEveryStepPasses: the summary passes, and the caller goes on.
func TestStepsPassWhenEveryStepPasses(t *testing.T) {
	out, code := runSteps(t, `
step "one" true
step "two" echo two
steps_summary
echo "after the summary"
`)
	if code != 0 {
		t.Fatalf("exit code %d, want 0; output:\n%s", code, out)
	}
	for _, want := range []string{"=== all 2 steps passed", "after the summary"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"one", "two"} {
		if !summaryLine("ok", name).MatchString(out) {
			t.Errorf("the summary has no ok line for %q:\n%s", name, out)
		}
	}
}
