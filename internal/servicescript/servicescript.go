// Package servicescript runs scripts/services.sh for tests that start a service of their own
// (the secure brokers), and reads the environment variables that script prints.
package servicescript

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Timeout bounds one run of the script: a first start resolves jars, makes certificates and
// secrets, and waits for the service.
const Timeout = 5 * time.Minute

// Env returns the environment variable name, or def when it is unset or empty.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Script is scripts/services.sh of the repository at Root, run with the extra environment
// entries Env (overrides of its ports and directories, for an instance of its own).
type Script struct {
	Root string
	Env  []string
}

// Find returns the script of the nearest directory above the working directory that holds
// scripts/services.sh, with the extra environment entries env.
func Find(env ...string) (Script, error) {
	dir, err := os.Getwd()
	if err != nil {
		return Script{}, fmt.Errorf("servicescript: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "services.sh")); err == nil {
			return Script{Root: dir, Env: env}, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return Script{}, errors.New("servicescript: scripts/services.sh not found above the working directory")
		}
		dir = parent
	}
}

// Path is the script's file.
func (s Script) Path() string { return filepath.Join(s.Root, "scripts", "services.sh") }

// Command returns the command line that runs `scripts/services.sh sub` with the script's
// environment, e.g. for Watermill's Features.RestartServiceCommand.
func (s Script) Command(sub string) []string {
	argv := append([]string{"env"}, s.Env...)
	return append(argv, "bash", s.Path(), sub)
}

// Run runs `scripts/services.sh args...` (bounded by Timeout); its error holds what the script
// printed.
func (s Script) Run(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{s.Path()}, args...)...)
	cmd.Env = append(os.Environ(), s.Env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("servicescript: %s %s: %w: %s", s.Path(), strings.Join(args, " "), err,
			strings.TrimSpace(out.String()))
	}
	return nil
}
