#!/usr/bin/env bash
# Soak tests: checks that depend on timing or on a race happening, kept out of the gate
# (scripts/test.sh) because their verdict would depend on luck. Starts the test services, runs
# every TestSoak* test with OUTBOXKIT_SOAK=1 and prints what each measured (its "soak:" lines).
# OUTBOXKIT_SOAK_RUNS=N makes each test repeat N times (default: the test's own, 20 or so).
# Extra arguments go to `go test` (for example -run '^TestSoakPulsarSchemaRace$').
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/services.sh up
eval "$(bash scripts/services.sh env)"
export OUTBOXKIT_SOAK=1

# The packages that hold a soak test.
mapfile -t pkgs < <(git grep -l '^func TestSoak' -- '*_test.go' | xargs -n1 dirname | sort -u | sed 's|^|./|')
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
go test -count=1 -p 1 -timeout 3h -v -run '^TestSoak' "$@" "${pkgs[@]}" 2>&1 | tee "$log" || rc=$?
echo
echo "soak summary:"
grep -E '^\s+\S+\.go:[0-9]+: soak: |^--- (PASS|FAIL|SKIP): TestSoak' "$log" || echo "  (no soak test ran)"
exit "$rc"
