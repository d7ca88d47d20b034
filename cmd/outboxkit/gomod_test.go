package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestGoModInstallable checks that go.mod has no replace or exclude directive: the go command
// refuses `go install github.com/outboxkit/outboxkit/cmd/outboxkit@version` for a module that has
// one (docs/releasing.md; scripts/release-check.sh proves the whole install).
func TestGoModInstallable(t *testing.T) {
	t.Parallel()
	name := filepath.Join("..", "..", "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	for _, r := range f.Replace {
		t.Errorf("%s:%d: replace %s => %s: go install …@version refuses a module with a replace directive",
			name, r.Syntax.Start.Line, r.Old.Path, r.New.Path)
	}
	for _, e := range f.Exclude {
		t.Errorf("%s:%d: exclude %s %s: go install …@version refuses a module with an exclude directive",
			name, e.Syntax.Start.Line, e.Mod.Path, e.Mod.Version)
	}
}
