#!/usr/bin/env bash
# Builds the outboxkit container image without a Docker engine: the static binary
# (CGO_ENABLED=0), then deploy/image (go-containerregistry) puts it FROM scratch with the host's
# CA bundle, user 65532:65532, entry point /usr/local/bin/outboxkit. Nothing is pulled.
#
#   bash scripts/image.sh [TARBALL] [TAG]     # defaults: outboxkit-image.tar, outboxkit:dev
#
# Load or push the tarball with any of: docker load -i, podman load -i, kind load image-archive,
# crane push TARBALL REGISTRY/outboxkit:TAG. OCI_LAYOUT=DIR also writes an OCI image layout.
# GOARCH=arm64 builds for arm64; SOURCE_DATE_EPOCH fixes the image's time (default 0).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(realpath -m "${1:-outboxkit-image.tar}")"
tag="${2:-outboxkit:dev}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$root"
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags='-s -w' -o "$work/outboxkit" ./cmd/outboxkit
args=(-binary "$work/outboxkit" -tar "$out" -tag "$tag")
if [ -n "${OCI_LAYOUT:-}" ]; then
  args+=(-oci-layout "$(realpath -m "$OCI_LAYOUT")")
fi
cd deploy
GOARCH= go run ./image "${args[@]}"
echo "image: $out" >&2
