package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where things are in the image, and who runs it.
const (
	// BinaryPath is the outboxkit binary, the image's entry point.
	BinaryPath = "/usr/local/bin/outboxkit"
	// CACertsPath is the CA bundle Go's crypto/x509 reads on Linux.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// User is the numeric user and group the image runs as: not root, and numeric so that no
	// /etc/passwd is needed and Kubernetes' runAsNonRoot can check it (the Helm chart's default
	// runAsUser; distroless's "nonroot").
	User = "65532:65532"
	// MetricsPort is the relay's default /metrics, /livez and /readyz port in a container.
	MetricsPort = "9464/tcp"
)

// Options describe the image to build.
type Options struct {
	// Binary is the outboxkit binary: statically linked (CGO_ENABLED=0), for Linux.
	Binary string
	// CACerts is a PEM bundle copied to CACertsPath ("" for none: then the relay cannot verify
	// TLS servers unless the configuration names a CA file).
	CACerts string
	// Version is the org.opencontainers.image.version label ("" for none).
	Version string
	// Created is the image's creation time and every file's modification time; a fixed value
	// (SOURCE_DATE_EPOCH) makes the image reproducible.
	Created time.Time
}

// Build makes the image FROM scratch: one layer with the binary, the CA bundle and /tmp.
func Build(opts Options) (v1.Image, error) {
	arch, err := staticLinuxBinary(opts.Binary)
	if err != nil {
		return nil, err
	}
	files, err := layerFiles(opts)
	if err != nil {
		return nil, err
	}
	data, err := tarOf(files, opts.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Created = v1.Time{Time: opts.Created}
	cfg.Config = v1.Config{
		Entrypoint:   []string{BinaryPath},
		Cmd:          []string{"--help"},
		User:         User,
		WorkingDir:   "/",
		Env:          []string{"PATH=/usr/local/bin"},
		ExposedPorts: map[string]struct{}{MetricsPort: {}},
		Labels:       labels(opts),
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}

func labels(opts Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":  "outboxkit",
		"org.opencontainers.image.source": "https://github.com/outboxkit/outboxkit",
	}
	if opts.Version != "" {
		l["org.opencontainers.image.version"] = opts.Version
	}
	return l
}

// goArch maps an ELF machine to the image's architecture.
var goArch = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_386: "386",
	elf.EM_ARM: "arm", elf.EM_PPC64: "ppc64le", elf.EM_S390: "s390x", elf.EM_RISCV: "riscv64"}

// staticLinuxBinary checks that path is a statically linked Linux executable (an image FROM
// scratch has no dynamic loader or libc) and returns its architecture.
func staticLinuxBinary(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("binary %s: not a Linux executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("binary %s is dynamically linked (it needs a loader the image does not have): build it with CGO_ENABLED=0", path)
		}
	}
	arch, ok := goArch[f.Machine]
	if !ok {
		return "", fmt.Errorf("binary %s: unsupported machine %s", path, f.Machine)
	}
	return arch, nil
}

// file is one entry of the layer.
type file struct {
	path string // absolute, in the image
	mode int64
	dir  bool
	data []byte
}

// layerFiles lists the layer's entries, parents first. Files belong to root and are not
// writable by the image's user.
func layerFiles(opts Options) ([]file, error) {
	bin, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("binary: %w", err)
	}
	files := dirs("/usr/local/bin", 0o755)
	files = append(files, file{path: BinaryPath, mode: 0o755, data: bin})
	if opts.CACerts != "" {
		certs, err := os.ReadFile(opts.CACerts)
		if err != nil {
			return nil, fmt.Errorf("ca certificates: %w", err)
		}
		if !bytes.Contains(certs, []byte("-----BEGIN CERTIFICATE-----")) {
			return nil, fmt.Errorf("ca certificates %s: no PEM certificate", opts.CACerts)
		}
		files = append(files, dirs(path.Dir(CACertsPath), 0o755)...)
		files = append(files, file{path: CACertsPath, mode: 0o644, data: certs})
	}
	// A writable /tmp for a container started without a volume there (the chart mounts one).
	files = append(files, file{path: "/tmp", mode: 0o1777, dir: true})
	return files, nil
}

// dirs returns dir and its parents as directory entries, outermost first.
func dirs(dir string, mode int64) []file {
	if dir == "/" || dir == "." {
		return nil
	}
	return append(dirs(path.Dir(dir), mode), file{path: dir, mode: mode, dir: true})
}

// tarOf writes the entries as an uncompressed tar, every time set to mtime.
func tarOf(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.path] {
			continue
		}
		seen[f.path] = true
		hdr := &tar.Header{Name: f.path[1:], Mode: f.mode, ModTime: mtime, Format: tar.FormatPAX,
			Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		if f.dir {
			hdr.Name += "/"
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.path, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return buf.Bytes(), nil
}

// Write saves img as an image tarball at tarPath (docker load, podman load, kind load
// image-archive, crane push read it) and, unless layoutDir is "", as an OCI image layout there
// (skopeo copy oci:DIR, crane push --index). tag names the image in both.
func Write(img v1.Image, tag, tarPath, layoutDir string) error {
	if tarPath == "" && layoutDir == "" {
		return errors.New("nothing to write: give a tarball path or an OCI layout folder")
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	if tarPath != "" {
		if err := tarball.WriteToFile(tarPath, ref, img); err != nil {
			return fmt.Errorf("write %s: %w", tarPath, err)
		}
	}
	if layoutDir != "" {
		p, err := layout.Write(layoutDir, empty.Index)
		if err != nil {
			return fmt.Errorf("oci layout %s: %w", layoutDir, err)
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref.Name(),
		})); err != nil {
			return fmt.Errorf("oci layout %s: %w", layoutDir, err)
		}
	}
	return nil
}
