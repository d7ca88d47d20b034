# shellcheck shell=bash
# The step runner of scripts/test.sh: every step runs, whatever the steps before it did, and the
# summary at the end names each one with its status and seconds.
#
#   step NAME CMD [ARGS...]   run CMD ARGS (a program or a shell function) as the step NAME, in a
#                             subshell with `set -eo pipefail` (the first failing command fails the
#                             step); record its status and seconds; never stop the caller.
#   steps_summary             print one line per step and return 1 if any step failed.

_step_names=()
_step_status=()
_step_seconds=()

step() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "=== step: $name"
  # Not `cmd || rc=$?`: a function run on the left of || has set -e ignored, and would go on
  # after its first failing command. set +e around a subshell that sets -e again keeps it.
  local errexit=0
  [[ $- == *e* ]] && errexit=1
  set +e
  (
    set -eo pipefail
    "$@"
  )
  rc=$?
  ((errexit)) && set -e
  _step_names+=("$name")
  _step_seconds+=($((SECONDS - start)))
  if ((rc == 0)); then
    _step_status+=(ok)
  else
    _step_status+=("FAIL")
    echo "=== step: $name failed (exit $rc)" >&2
  fi
  return 0
}

steps_summary() {
  local i failed=0
  echo "=== summary"
  printf '%-6s %8s  %s\n' status seconds step
  for i in "${!_step_names[@]}"; do
    printf '%-6s %7ss  %s\n' "${_step_status[$i]}" "${_step_seconds[$i]}" "${_step_names[$i]}"
    [ "${_step_status[$i]}" = ok ] || failed=$((failed + 1))
  done
  if ((failed > 0)); then
    echo "=== $failed of ${#_step_names[@]} steps failed"
    return 1
  fi
  echo "=== all ${#_step_names[@]} steps passed"
}
