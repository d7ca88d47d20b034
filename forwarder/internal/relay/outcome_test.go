package relay

import (
	"errors"
	"fmt"
	"testing"
)

// OnlyNotTried tells a delivery that failed only by leaving events for an outage (which must not
// back off the worker's other keys) from one with any other failure.
func TestOnlyNotTried(t *testing.T) {
	notTried := fmt.Errorf("%d events not tried, no attempt counted: %w: %w", 2, ErrOutage, errors.New("registry: connection refused"))
	other := errors.New("kafka: not leader for partition")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"not tried", notTried, true},
		{"wrapped", fmt.Errorf("unit 3: %w", notTried), true},
		{"joined", errors.Join(fmt.Errorf("unit 1: %w", notTried), fmt.Errorf("unit 2: %w", notTried)), true},
		{"joined with another failure", errors.Join(fmt.Errorf("unit 1: %w", notTried), fmt.Errorf("unit 2: %w", other)), false},
		{"another failure", other, false},
		{"another failure wrapping two", fmt.Errorf("%w: %w", other, errors.New("x")), false},
	} {
		if got := OnlyNotTried(c.err); got != c.want {
			t.Errorf("%s: OnlyNotTried(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
