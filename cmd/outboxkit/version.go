package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion describes the binary from the build information Go embeds: the module version
// ("(devel)" for a build from a source tree), the VCS revision and time when built in a git
// checkout, and the Go version.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "outboxkit (no build information) " + runtime.Version()
	}
	version := info.Main.Version
	var revision, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	out := "outboxkit " + version
	if revision != "" {
		out += fmt.Sprintf(" revision %s%s %s", revision, modified, at)
	}
	return out + " " + info.GoVersion
}

// versionCommand prints buildVersion, as `outboxkit --version` does.
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary (module version, VCS revision and time, Go version)",
		Args:  cobra.NoArgs,
		RunE: a.runE(func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(a.stdout, buildVersion())
			return err
		}),
	}
}
