#!/usr/bin/env bash
# Proves the release procedure of docs/releasing.md end to end, without the internet:
#   1. clones this repository and tags its HEAD commit with a throwaway version in the clone
#      (never in this repository);
#   2. builds a file-based module proxy from that tag the way the public proxy does: `go mod
#      download` in direct mode, with git redirected from the module's GitHub address to the clone;
#   3. as a new user (empty HOME, GOPATH and module cache; the module proxies are that proxy and
#      this machine's module cache, read as a file proxy; any HTTP(S) request fails), runs
#      `go install github.com/outboxkit/outboxkit/cmd/outboxkit@VERSION` and checks that
#      `outboxkit version` prints VERSION, the commit (the tag and the module's checksum) and the
#      Go version;
#   4. in a new module, `go get github.com/outboxkit/outboxkit@VERSION`, then builds and runs the
#      quickstart (examples/quickstart/main.go, copied) against it.
# The build cache is shared with this machine's (it is content-addressed), and every build is
# static and uses -trimpath (CGO_ENABLED=0, as scripts/image.sh and the deploy module's image
# test build; every dependency is pure Go): with -trimpath a dependency's cache entry does not
# depend on where the module cache is, so what those builds or a rerun compiled is not compiled
# again.
#
#   bash scripts/release-check.sh            # version v0.99.0
#   RELEASE_CHECK_VERSION=v1.2.3 bash scripts/release-check.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

module=github.com/outboxkit/outboxkit
version=${RELEASE_CHECK_VERSION:-v0.99.0}
repo=$PWD
go_version=$(go env GOVERSION)
host_modcache=$(go env GOMODCACHE)
build_cache=$(go env GOCACHE)
go_bin=$(dirname "$(command -v go)")

say() { echo "release-check: $*"; }
fail() {
  echo "release-check: FAIL: $*" >&2
  exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/outboxkit-release-check.XXXXXX")
# The module cache's files are read-only.
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

commit=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  say "the work tree has uncommitted changes: they are not part of the check (it tags commit $commit)"
fi

# 0. Fill this machine's module cache with what the binary and the quickstart need, with the
# machine's own settings (nothing to do when CI's earlier steps or a build did it). Every step
# after this one reads modules only from local files.
go list -deps ./cmd/outboxkit ./examples/quickstart >/dev/null

# Requests to any HTTP(S) address go to a closed local port, so a step that reached for the
# internet (a module proxy, the checksum database, a toolchain download) fails.
offline=(HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 http_proxy=http://127.0.0.1:9
  https_proxy=http://127.0.0.1:9 NO_PROXY= no_proxy=)

# 1. A clone with the throwaway tag.
git clone -q --no-checkout "$repo" "$work/src"
# A detached HEAD that no branch contains is not in the clone yet.
git -C "$work/src" cat-file -e "$commit^{commit}" 2>/dev/null || git -C "$work/src" fetch -q "$repo" "$commit"
git -C "$work/src" -c user.name=release-check -c user.email=release-check@localhost \
  tag -a -m "release check $version" "$version" "$commit"
say "tagged $commit as $version in a clone"

# 2. The module proxy, made by the go command in direct mode from the tag.
cat >"$work/gitconfig" <<EOF
[url "file://$work/src"]
	insteadOf = https://$module
EOF
mkdir "$work/proxy-gopath"
download=$(cd "$work" && env -i PATH="$go_bin:$PATH" HOME="$work" "${offline[@]}" GOENV=off GOTOOLCHAIN=local \
  GOPATH="$work/proxy-gopath" GOCACHE="$build_cache" GOPROXY=direct GONOSUMDB="$module" GOFLAGS= \
  GIT_CONFIG_GLOBAL="$work/gitconfig" GIT_CONFIG_NOSYSTEM=1 \
  go mod download -json "$module@$version") || fail "go mod download $module@$version from the clone: $download"
proxy="$work/proxy-gopath/pkg/mod/cache/download"
sum=$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"$download")
for f in list "$version.info" "$version.mod" "$version.zip"; do
  [ -s "$proxy/$module/@v/$f" ] || fail "the proxy has no $module/@v/$f"
done
grep -q "\"Hash\":\"$commit\"" "$proxy/$module/@v/$version.info" ||
  fail "$version.info does not name commit $commit: $(cat "$proxy/$module/@v/$version.info")"
say "module proxy at $proxy: $module@$version ($sum, commit $commit)"

# 3. A new user installs the binary.
mkdir -p "$work/home" "$work/gopath"
user=(env -i PATH="$go_bin:/usr/local/bin:/usr/bin:/bin" HOME="$work/home" TMPDIR="${TMPDIR:-/tmp}" "${offline[@]}"
  GOTOOLCHAIN=local GOPATH="$work/gopath" GOCACHE="$build_cache" GOFLAGS=-trimpath CGO_ENABLED=0
  GOPROXY="file://$proxy,file://$host_modcache/cache/download" GONOSUMDB="$module")
# `go install …@version` has no go.sum of its own to consult: it asks the checksum database for
# every dependency, which is on the internet. Offline, this one command runs with the checksum
# database off, and every module it downloaded is then checked against the release's own go.sum,
# the list of checksums the database would have confirmed.
start=$SECONDS
(cd "$work/home" && "${user[@]}" GOSUMDB=off go install "$module/cmd/outboxkit@$version") ||
  fail "go install $module/cmd/outboxkit@$version"
say "go install $module/cmd/outboxkit@$version: $((SECONDS - start)) s"
release_sum="$work/gopath/pkg/mod/$module@$version/go.sum"
downloads="$work/gopath/pkg/mod/cache/download"
checked=0
while IFS= read -r ziphash; do
  rel=${ziphash#"$downloads/"}
  path=$(sed 's/!\([a-z]\)/\U\1/g' <<<"${rel%/@v/*}")
  ver=$(basename "$ziphash" .ziphash)
  [ "$path" = "$module" ] && continue
  grep -qxF "$path $ver $(cat "$ziphash")" "$release_sum" ||
    fail "go install downloaded $path $ver with checksum $(cat "$ziphash"), which the release's go.sum does not name"
  checked=$((checked + 1))
done < <(find "$downloads" -name '*.ziphash')
[ "$checked" -gt 0 ] || fail "go install downloaded no dependency: nothing was checked"
say "the $checked dependencies go install downloaded have the checksums of the release's go.sum"
out=$("$work/gopath/bin/outboxkit" version)
echo "$out"
mapfile -t lines <<<"$out"
[ "${lines[0]}" = "outboxkit $version" ] || fail "version line: ${lines[0]}, want \"outboxkit $version\""
[[ "${lines[1]}" == "commit    $version (the tag; module $module $sum)" ]] ||
  fail "commit line: ${lines[1]}, want the tag $version and the module checksum $sum"
[[ "${lines[2]}" == "go        $go_version "* ]] || fail "go line: ${lines[2]}, want $go_version"

# 4. A new module uses the release: go get, then build and run the quickstart against it (the
# checksum database on: a module that go.sum does not name fails the step). Its
# go.sum starts as the release's own go.sum, the checksums a user's go get verifies against the
# checksum database online.
mkdir "$work/quickstart"
cp examples/quickstart/main.go "$work/quickstart/"
cp "$work/gopath/pkg/mod/$module@$version/go.sum" "$work/quickstart/go.sum"
chmod u+w "$work/quickstart/go.sum"
start=$SECONDS
(
  cd "$work/quickstart"
  "${user[@]}" go mod init example.com/quickstart
  "${user[@]}" go get "$module@$version"
  # -mod=mod adds the quickstart's other imports (Watermill, franz-go's kfake via outboxkit,
  # SQLite) at the versions the release selects; `go mod tidy` would also fetch the test
  # dependencies of every dependency, which this machine's module cache does not hold.
  "${user[@]}" GOFLAGS="-trimpath -mod=mod" go build -o quickstart .
) 2>&1 | sed 's/^/  /' || fail "building the quickstart against $module@$version"
[ -x "$work/quickstart/quickstart" ] || fail "building the quickstart against $module@$version"
grep -q "^	$module $version\$" "$work/quickstart/go.mod" ||
  fail "the quickstart's go.mod does not require $module $version: $(cat "$work/quickstart/go.mod")"
say "quickstart built against $module@$version: $((SECONDS - start)) s"
run=$(cd "$work/quickstart" && timeout 120 ./quickstart 2>&1) || fail "the quickstart failed: $run"
grep -q "events consumed for orders o-1, o-3; none for o-2" <<<"$run" || fail "the quickstart's output: $run"
say "the quickstart ran: events consumed for orders o-1, o-3; none for o-2"
say "ok: $module@$version installs and builds from a module proxy"
