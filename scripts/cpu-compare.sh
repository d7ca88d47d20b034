#!/usr/bin/env bash
# Relay CPU per event of two commits, side by side in one relaybench run.
#
#   bash scripts/cpu-compare.sh <before-ref> <after-ref> [relaybench flags...]
#   EVENTS=50000 REPEAT=3 bash scripts/cpu-compare.sh 3adde35 main
#
# Builds relaybench at both refs (temporary git worktrees, removed on exit) and runs the
# after-ref's binary with -baseline set to the before-ref's: every repetition drains the same
# backlog with the polling relay (outboxkit) and the cdc relay (outboxkit-cdc) of each commit,
# alternately (the baseline first in every other repetition). Each relay is a child process;
# its CPU is its own user+system time (the writers and the consumer are relaybench's). The table
# "relay CPU per event" lists every run, the median, the spread and after/before (vs @base).
#
# The services must be up (bash scripts/services.sh up); the after-ref must have relaybench's
# -baseline flag. Settings: EVENTS (default 50000), REPEAT (3), KEYS (1000), PAYLOAD (256);
# further arguments are passed to relaybench (e.g. -delivery exactly_once).
set -euo pipefail

if [ $# -lt 2 ]; then
	echo "usage: $0 <before-ref> <after-ref> [relaybench flags...]" >&2
	exit 2
fi
before=$1
after=$2
shift 2
root=$(git rev-parse --show-toplevel)
for ref in "$before" "$after"; do
	if ! git -C "$root" rev-parse --verify --quiet "$ref^{commit}" >/dev/null; then
		echo "$0: $ref is not a commit of $root" >&2
		exit 2
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpu-compare.XXXXXX")
cleanup() {
	for side in before after; do
		if [ -d "$tmp/$side" ]; then
			git -C "$root" worktree remove --force "$tmp/$side" >/dev/null 2>&1 || true
		fi
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

build() { # side ref
	git -C "$root" worktree add --quiet --detach "$tmp/$1" "$2"
	(cd "$tmp/$1" && go build -o "$tmp/relaybench-$1" ./internal/cmd/relaybench)
	git -C "$root" worktree remove --force "$tmp/$1"
	echo "built relaybench at $2 ($(git -C "$root" rev-parse --short "$2^{commit}")) for $1"
}
build before "$before"
build after "$after"
if ! "$tmp/relaybench-after" -h 2>&1 | grep -q -- '-baseline'; then
	echo "$0: relaybench at $after has no -baseline flag (it predates scripts/cpu-compare.sh)" >&2
	exit 2
fi

if [ -z "${OUTBOXKIT_TEST_PG_DSN:-}" ]; then
	eval "$(bash "$root/scripts/services.sh" env)"
fi
echo "load before: $(uptime)"
"$tmp/relaybench-after" -baseline "$tmp/relaybench-before" -relays outboxkit -source cdc -dbs postgres \
	-keys "${KEYS:-1000}" -payloads "${PAYLOAD:-256}" -rate 0 -write-side=false -repeat "${REPEAT:-3}" -events "${EVENTS:-50000}" "$@"
echo "load after: $(uptime)"
echo "before = $before ($(git -C "$root" rev-parse --short "$before^{commit}")), after = $after ($(git -C "$root" rev-parse --short "$after^{commit}")); @base rows are the before's"
