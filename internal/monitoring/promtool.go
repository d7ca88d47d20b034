package monitoring

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Promtool runs Prometheus' promtool binary (Debian package prometheus).
type Promtool struct {
	// Path is the promtool binary.
	Path string
}

// CheckRules runs `promtool check rules` on files and returns its output.
func (p Promtool) CheckRules(ctx context.Context, files ...string) (string, error) {
	return p.run(ctx, "", append([]string{"check", "rules"}, files...)...)
}

// TestRules runs `promtool test rules` on the unit-test files, from dir (rule_files in a test
// file are relative to the test file, so dir only matters for messages), and returns its output.
func (p Promtool) TestRules(ctx context.Context, dir string, files ...string) (string, error) {
	return p.run(ctx, dir, append([]string{"test", "rules"}, files...)...)
}

// CheckConfig runs `promtool check config` on a Prometheus configuration file.
func (p Promtool) CheckConfig(ctx context.Context, file string) (string, error) {
	return p.run(ctx, "", "check", "config", file)
}

func (p Promtool) run(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, p.Path, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if err != nil {
		return text, fmt.Errorf("promtool %s: %w: %s", strings.Join(args, " "), err, text)
	}
	return text, nil
}
