// Command image builds the outboxkit container image without a Docker engine, with
// go-containerregistry: FROM scratch, one layer holding the static outboxkit binary (the entry
// point), the host's CA bundle and /tmp, run as the numeric non-root user 65532:65532. It
// writes an image tarball and, optionally, an OCI image layout. Nothing is pulled.
//
//	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /tmp/outboxkit ./cmd/outboxkit
//	cd deploy && go run ./image -binary /tmp/outboxkit -tar /tmp/outboxkit.tar -tag outboxkit:dev
//
// scripts/image.sh does both. SOURCE_DATE_EPOCH sets the image's time (default 0), so the same
// binary gives the same image digest.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run parses the command line, builds the image and writes it, printing its digest.
func run(args []string, stdout io.Writer, lookupEnv func(string) (string, bool)) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var (
		opts            Options
		tag, tarPath    string
		layoutDir, date string
	)
	fs.StringVar(&opts.Binary, "binary", "", "the static outboxkit binary (CGO_ENABLED=0, GOOS=linux); required")
	fs.StringVar(&opts.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM CA bundle to copy into the image (\"\" for none)")
	fs.StringVar(&opts.Version, "version", "", "the org.opencontainers.image.version label")
	fs.StringVar(&tag, "tag", "outboxkit:dev", "the image's name in the tarball and the layout")
	fs.StringVar(&tarPath, "tar", "", "write an image tarball here (docker/podman load, kind load image-archive, crane push)")
	fs.StringVar(&layoutDir, "oci-layout", "", "also write an OCI image layout into this folder")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if opts.Binary == "" || (tarPath == "" && layoutDir == "") {
		return fmt.Errorf("-binary and -tar (or -oci-layout) are required")
	}
	if v, ok := lookupEnv("SOURCE_DATE_EPOCH"); ok {
		date = v
	}
	opts.Created = time.Unix(0, 0).UTC()
	if date != "" {
		secs, err := strconv.ParseInt(date, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: not a number of seconds", date)
		}
		opts.Created = time.Unix(secs, 0).UTC()
	}
	img, err := Build(opts)
	if err != nil {
		return err
	}
	if err := Write(img, tag, tarPath, layoutDir); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s\n", tag, digest)
	return nil
}
