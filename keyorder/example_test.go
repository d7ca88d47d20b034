package keyorder_test

import (
	"fmt"

	"github.com/outboxkit/outboxkit/keyorder"
)

// A call of five messages of keys a and b in waves: the broker fails message 1 (key b), so b's
// later message is held back, unsent, while a goes on.
func Example() {
	keys := []string{"a", "b", "a", "b", "a"}
	plan := keyorder.Waves(keys)
	plan.Run(func(round []int) bool {
		fmt.Println("send", round)
		for _, i := range round {
			if i == 1 {
				plan.Stop(plan.Key(i))
			}
		}
		return true
	}, func(i int) {
		fmt.Println("held back", i)
	})
	// Output:
	// send [0 1]
	// held back 3
	// send [2]
	// send [4]
}
