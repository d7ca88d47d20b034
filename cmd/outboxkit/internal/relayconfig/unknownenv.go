package relayconfig

import (
	"slices"
	"strings"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
)

// EnvPrefix is the prefix of every environment variable the configuration reads.
const EnvPrefix = "OUTBOXKIT_"

// EnvTestPrefix is reserved for the project's test scripts (scripts/services.sh env exports the
// test services' addresses under it): UnknownEnv leaves these variables out.
const EnvTestPrefix = "OUTBOXKIT_TEST_"

// UnknownVar is a set variable with the configuration's prefix that the configuration does not
// read, with the known name nearest to it.
type UnknownVar struct {
	Name    string
	Nearest string
}

// UnknownEnv returns the variables of environ ("NAME=value" entries, as os.Environ gives them)
// that start with EnvPrefix but that neither the CLI (EnvNames) nor the broker part
// (brokerconfig.EnvNames) reads, in environ's order, each with the nearest known name by edit
// distance; EnvTestPrefix variables are left out. Names only: values may be secrets.
func UnknownEnv(environ []string) []UnknownVar {
	known := append(EnvNames(), brokerconfig.EnvNames()...)
	var unknown []UnknownVar
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || strings.HasPrefix(name, EnvTestPrefix) || slices.Contains(known, name) {
			continue
		}
		unknown = append(unknown, UnknownVar{Name: name, Nearest: nearest(name, known)})
	}
	return unknown
}

// nearest returns the name of names at the smallest edit distance from name (the first one on
// a tie).
func nearest(name string, names []string) string {
	best, bestDist := "", -1
	for _, n := range names {
		if d := levenshtein(name, n); bestDist < 0 || d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// levenshtein is the edit distance between a and b (insertions, deletions, substitutions of
// bytes: the names are ASCII).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
