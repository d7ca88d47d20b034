package testsupport

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// CounterSum returns the sum of every series of the counter name gathered from reg, 0 when
// there is none.
func CounterSum(t testing.TB, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// CounterValue returns the value of the counter name gathered from reg, which must have
// exactly one series: another number of series, or none, fails the test.
func CounterValue(t testing.TB, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			if len(f.GetMetric()) != 1 {
				t.Fatalf("metric %s has %d series, want 1", name, len(f.GetMetric()))
			}
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}
