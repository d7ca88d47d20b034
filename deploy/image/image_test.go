package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// outboxkitBinary builds the static outboxkit binary once, as scripts/image.sh does.
func outboxkitBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "outboxkit-image-test")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "outboxkit")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", builtBin, "./cmd/outboxkit")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New("go build ./cmd/outboxkit: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// TestImageRunsTheBinaryAsANonRootUser builds the image into a tarball and an OCI layout, reads
// the tarball back, and checks its entry point, its numeric non-root user, its files, and that
// the binary taken out of the layer runs `version` as that user.
func TestImageRunsTheBinaryAsANonRootUser(t *testing.T) {
	dir := t.TempDir()
	tarPath, layoutDir := filepath.Join(dir, "outboxkit.tar"), filepath.Join(dir, "layout")
	var stdout bytes.Buffer
	env := func(string) (string, bool) { return "", false }
	if err := run([]string{"-binary", outboxkitBinary(t), "-tar", tarPath, "-oci-layout", layoutDir,
		"-tag", "registry.example.com/outboxkit:test", "-version", "test"}, &stdout, env); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag("registry.example.com/outboxkit:test")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		t.Fatalf("read the image tarball back: %v", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Entrypoint; len(got) != 1 || got[0] != BinaryPath {
		t.Errorf("entry point %v, want [%s]", got, BinaryPath)
	}
	uid, gid, ok := strings.Cut(cfg.Config.User, ":")
	u, errU := strconv.Atoi(uid)
	g, errG := strconv.Atoi(gid)
	if !ok || errU != nil || errG != nil || u == 0 || g == 0 {
		t.Fatalf("user %q: want numeric uid:gid, not root", cfg.Config.User)
	}
	if cfg.OS != "linux" || cfg.Architecture == "" {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	if !slices.Contains(cfg.Config.Env, "PATH=/usr/local/bin") {
		t.Errorf("env %v: PATH must find outboxkit (kubectl exec ... -- outboxkit status)", cfg.Config.Env)
	}
	if _, ok := cfg.Config.ExposedPorts[MetricsPort]; !ok {
		t.Errorf("exposed ports %v lack %s", cfg.Config.ExposedPorts, MetricsPort)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("want one layer (FROM scratch), have %d (%v)", len(layers), err)
	}

	files := extract(t, img)
	bin, ok := files[BinaryPath[1:]]
	if !ok {
		t.Fatalf("the layer has no %s: %v", BinaryPath, keys(files))
	}
	if bin.hdr.Mode&0o111 == 0 || bin.hdr.Mode&0o022 != 0 || bin.hdr.Uid != 0 {
		t.Errorf("%s mode %o owner %d: want executable, owned by root, not writable by others", BinaryPath, bin.hdr.Mode, bin.hdr.Uid)
	}
	if c, ok := files[CACertsPath[1:]]; !ok || !bytes.Contains(c.data, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("the layer has no CA bundle at %s", CACertsPath)
	}
	if _, ok := files["etc/passwd"]; ok {
		t.Error("the image has an /etc/passwd: its user is meant to be numeric only")
	}

	exe := filepath.Join(t.TempDir(), "outboxkit")
	if err := os.WriteFile(exe, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(exe), filepath.Dir(filepath.Dir(exe))} { // t.TempDir makes 0700 folders
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	assertStatic(t, exe)
	cmd := exec.Command(exe, "version")
	if os.Geteuid() == 0 { // run it as the image's user, as a container would
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u), Gid: uint32(g)}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "outboxkit ") {
		t.Fatalf("the layer's binary `version` as %d:%d: %v\n%s", u, g, err, out)
	}
	t.Logf("%s `version`: %s", strings.TrimSpace(stdout.String()), strings.TrimSpace(string(out)))

	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatalf("read the OCI layout: %v", err)
	}
	man, err := idx.IndexManifest()
	if err != nil || len(man.Manifests) != 1 {
		t.Fatalf("OCI layout: want one image, have %v (%v)", man, err)
	}
	// The tarball keeps the config blob as built (its manifest is docker save's); the layout
	// keeps the built image whole, whose digest run printed.
	if d := man.Manifests[0].Digest.String(); !strings.HasSuffix(strings.TrimSpace(stdout.String()), " "+d) {
		t.Errorf("the OCI layout's image %s is not the one built (%s)", d, strings.TrimSpace(stdout.String()))
	}
	layoutImg, err := idx.Image(man.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfgLayout, _ := layoutImg.ConfigName()
	cfgTar, _ := img.ConfigName()
	if cfgLayout != cfgTar {
		t.Errorf("the OCI layout's config %s differs from the tarball's %s", cfgLayout, cfgTar)
	}
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// extract reads every file of the image's flattened filesystem.
func extract(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]entry{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(hdr.Name, "/")] = entry{hdr, data}
	}
}

func keys(m map[string]entry) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// assertStatic fails unless path is an ELF executable without a dynamic loader.
func assertStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s is dynamically linked", path)
		}
	}
}

// TestImageIsReproducible: the same binary and time give the same image digest.
func TestImageIsReproducible(t *testing.T) {
	opts := Options{Binary: outboxkitBinary(t), CACerts: "", Created: time.Unix(1700000000, 0)}
	var digests []string
	for range 2 {
		img, err := Build(opts)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Fatalf("two builds of one binary: %v", digests)
	}
}

// TestImageRefusesADynamicBinary: a binary that needs a dynamic loader (this test's own
// executable when built with cgo, or the host's /bin/ls) cannot run FROM scratch.
func TestImageRefusesADynamicBinary(t *testing.T) {
	ls, err := exec.LookPath("ls")
	if err != nil {
		t.Fatal(err)
	}
	ls, _ = filepath.EvalSymlinks(ls)
	f, err := elf.Open(ls)
	if err != nil {
		t.Fatal(err)
	}
	dynamic := false
	for _, p := range f.Progs {
		dynamic = dynamic || p.Type == elf.PT_INTERP
	}
	f.Close()
	if !dynamic {
		t.Fatalf("%s is static here: the negative control needs a dynamically linked executable", ls)
	}
	_, err = Build(Options{Binary: ls})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("Build(%s) = %v, want a refusal naming CGO_ENABLED=0", ls, err)
	}
}
