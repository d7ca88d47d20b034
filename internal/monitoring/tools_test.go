package monitoring

import (
	"net"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// repoRoot is the module's root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// deployPath is a file under deploy/.
func deployPath(t *testing.T, parts ...string) string {
	return filepath.Join(append([]string{repoRoot(t), "deploy"}, parts...)...)
}

// binary finds a tool of Debian's prometheus package: a skip outside CI, a failure with CI=true.
func binary(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		testsupport.Unavailable(t, name+" (Debian package prometheus; `bash scripts/services.sh` installs it)", err)
	}
	return path
}

func promtool(t *testing.T) Promtool { return Promtool{Path: binary(t, "promtool")} }

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
