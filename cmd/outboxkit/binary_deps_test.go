package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinaryLinksNoAthenZOrKubernetes checks what the outboxkit binary is built from: no package
// of k8s.io or sigs.k8s.io, and AthenZ only as the stand-in of third_party/athenz-noauth (go.mod's
// replace directive), which pulsar-client-go's auth package imports but outboxkit never uses.
func TestBinaryLinksNoAthenZOrKubernetes(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Dir}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	stub, err := filepath.Abs(filepath.Join("..", "..", "third_party", "athenz-noauth"))
	if err != nil {
		t.Fatal(err)
	}
	athenz := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, " ")
		switch {
		case strings.HasPrefix(path, "k8s.io/"), strings.HasPrefix(path, "sigs.k8s.io/"):
			t.Errorf("the binary links %s", path)
		case strings.HasPrefix(path, "github.com/AthenZ/"):
			athenz++
			if !strings.HasPrefix(dir, stub+string(filepath.Separator)) {
				t.Errorf("the binary links %s from %s, want the stand-in under %s", path, dir, stub)
			}
		}
	}
	if athenz == 0 {
		t.Error("no AthenZ package at all: pulsar-client-go no longer imports it, drop the replace directive and third_party/athenz-noauth")
	}
}
