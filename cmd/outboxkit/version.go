package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/module"
)

// versionInfo is what `outboxkit version` prints: which outboxkit this is, the commit it was built
// from and the Go toolchain that built it.
type versionInfo struct {
	// Version is the module version: vX.Y.Z for `go install …@vX.Y.Z`, a pseudo-version or
	// "(devel)" for a build in a checkout.
	Version string
	// Commit names the source: the VCS revision of a build in a git checkout, the tag of a
	// `go install …@vX.Y.Z` build (the go command records no revision for it), or the revision
	// prefix a pseudo-version carries.
	Commit string
	// Go is the version of the Go toolchain that built the binary.
	Go string
}

// readVersion reads versionInfo from the build information Go embeds in every binary, so a
// `go install` build needs no linker flags.
func readVersion() versionInfo {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return versionInfo{Version: "(unknown)", Commit: "unknown (the binary has no build information)", Go: runtime.Version()}
	}
	return versionFromBuildInfo(info)
}

// versionFromBuildInfo derives versionInfo from info: the commit is vcs.revision (with
// vcs.modified and vcs.time) when the go command stamped it, else what the module version says.
func versionFromBuildInfo(info *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: info.Main.Version, Go: info.GoVersion}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	var revision, at string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	switch {
	case revision != "":
		v.Commit = revision
		if modified {
			v.Commit += " (modified)"
		}
		if at != "" {
			v.Commit += " " + at
		}
	case module.IsPseudoVersion(v.Version):
		rev, err := module.PseudoVersionRev(v.Version)
		if err != nil {
			rev = v.Version
		}
		v.Commit = rev + " (from the pseudo-version)"
	case strings.HasPrefix(v.Version, "v"):
		v.Commit = v.Version + " (the tag; module " + info.Main.Path
		if info.Main.Sum != "" {
			v.Commit += " " + info.Main.Sum
		}
		v.Commit += ")"
	default:
		v.Commit = "unknown (built without VCS stamping: outside a git checkout, or with -buildvcs=false)"
	}
	return v
}

// String is the text `outboxkit version` prints: one "name value" line each.
func (v versionInfo) String() string {
	return fmt.Sprintf("outboxkit %s\ncommit    %s\ngo        %s %s/%s", v.Version, v.Commit, v.Go, runtime.GOOS, runtime.GOARCH)
}

// versionCommand prints readVersion, as `outboxkit --version` does.
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary (module version, commit, Go version)",
		Args:  cobra.NoArgs,
		RunE: a.runE(func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(a.stdout, readVersion())
			return err
		}),
	}
}
