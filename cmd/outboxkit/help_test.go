package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestHelp checks that --help of every command explains every one of its flags.
func TestHelp(t *testing.T) {
	t.Parallel()
	root := (&app{}).rootCommand()
	type node struct {
		path  []string
		flags []string
	}
	var nodes []node
	var visit func(path []string, c *cobra.Command)
	visit = func(path []string, c *cobra.Command) {
		var flags []string
		c.Flags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
		nodes = append(nodes, node{path: path, flags: flags})
		for _, sub := range c.Commands() {
			if sub.Name() == "help" {
				continue
			}
			visit(append(append([]string(nil), path...), sub.Name()), sub)
		}
	}
	visit(nil, root)
	if len(nodes) < 8 {
		t.Fatalf("found %d commands, want root, relay, migrate, status, dead-letters and its three", len(nodes))
	}
	for _, n := range nodes {
		res := cli(t, t.TempDir(), append(n.path, "--help")...)
		if res.code != 0 {
			t.Errorf("%v --help: %s", n.path, res)
			continue
		}
		for _, f := range n.flags {
			if !strings.Contains(res.stdout, "--"+f+" ") {
				t.Errorf("%v --help does not mention --%s:\n%s", n.path, f, res.stdout)
			}
		}
	}
}

// outboxkit version and --version print the module version, the commit and the Go version, one
// line each.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		res := cli(t, t.TempDir(), args...)
		lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
		if res.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "outboxkit ") ||
			!strings.HasPrefix(lines[1], "commit ") || !strings.HasPrefix(lines[2], "go ") || !strings.Contains(lines[2], " go1.") {
			t.Errorf("%v: %s, want the lines \"outboxkit <version>\", \"commit <commit>\", \"go go1.x os/arch\"", args, res)
		}
	}
}
