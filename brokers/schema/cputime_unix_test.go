//go:build unix

package schema

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time of the test process so far, for benchmarks that
// report CPU per event, which a busy machine disturbs less than the elapsed time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
