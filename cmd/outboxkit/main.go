// Command outboxkit runs the outboxkit relay as a standalone process and gives operators the
// outbox's status and its dead letters.
//
//	outboxkit relay --config outboxkit.yaml [--migrate]
//	outboxkit migrate --config outboxkit.yaml [--print]
//	outboxkit adopt --config outboxkit.yaml --mapping adopt.yaml [--dry-run] [--undo [--drop-relay-table]]
//	outboxkit status --config outboxkit.yaml [--json]
//	outboxkit dead-letters list|replay|discard ...
//	outboxkit version (or --version)
//
// Exit codes: 0 success, 1 runtime failure (database or broker unreachable, ...), 2 usage or
// configuration error. See docs/cli.md.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	// Database drivers the CLI opens by name.
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError marks an error as the user's to fix (a flag, an argument, the configuration): the
// process exits with code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErr(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// app is the state of one invocation, shared by the commands.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	configPath     string
	// scrubber removes the configuration's secrets from every error message and log line the
	// CLI prints (set once the configuration is loaded).
	scrubber func(string) string
	// started is set when a command's own code starts running: an error before that comes from
	// cobra's parsing of the command line, a usage error.
	started bool
}

// run executes the command line and returns the process's exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	msg := a.scrub(err.Error())
	var ue usageError
	if errors.As(err, &ue) || !a.started {
		fmt.Fprintf(stderr, "outboxkit: %s\n", msg)
		cmd, _, findErr := root.Find(args)
		if findErr != nil || cmd == nil {
			cmd = root
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	}
	fmt.Fprintf(stderr, "outboxkit: %s\n", msg)
	return exitRuntime
}

// scrub replaces every known secret in s.
func (a *app) scrub(s string) string {
	if a.scrubber == nil {
		return s
	}
	return a.scrubber(s)
}

// runE wraps a command's code so run can tell cobra's usage errors from the command's own.
func (a *app) runE(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.started = true
		return f(cmd, args)
	}
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "outboxkit",
		Short: "Relay transactional-outbox events to Kafka or Pulsar, and operate the outbox",
		Long: `outboxkit relays the events that applications commit into an outbox table (PostgreSQL,
MySQL/MariaDB or SQLite) to Kafka or Pulsar, and lets operators inspect the backlog and
replay or discard dead-lettered events.

Every command reads one YAML configuration file (--config); see docs/cli.md and
cmd/outboxkit/outboxkit.example.yaml.

Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Unknown subcommands are errors rather than a silent help page.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().StringVarP(&a.configPath, "config", "c", "outboxkit.yaml",
		"path of the YAML configuration file (database, forwarder, http, log and broker sections)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	root.Version = readVersion().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(a.relayCommand(), a.migrateCommand(), a.statusCommand(), a.scheduledCommand(), a.deadLettersCommand(), a.keysCommand(), a.cdcCommand(),
		a.walSlotCommand(), a.adoptCommand(), a.versionCommand(), a.probeCommand())
	return root
}
