//go:build !unix

package schema

import "time"

// processCPU is not measured here: benchmarks report 0 CPU per event.
func processCPU() time.Duration { return 0 }
