// Package gatescript holds the tests of scripts/lib/steps.sh, the step runner of the gate
// (scripts/test.sh, which .ci/run calls): every step runs whatever the steps before it did, a
// step fails at its first failing command, and the summary names every step and fails the run
// when any step failed. It has no code of its own.
package gatescript
