package reconnecttest

import (
	"fmt"
	"os"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// EnvOptIn opts in to the broker packages' TestReconnectKeepsEveryDeliveredMessage
// (EnvOptIn=1): scripts/test.sh sets it in a step of its own after the suite, because each
// restarts a JVM broker of its own twice, which the suite's load would slow down and which
// would slow the suite.
const EnvOptIn = "OUTBOXKIT_TEST_RECONNECT"

// Start starts a broker package's dedicated broker for test t and returns the constructor of
// the publisher and subscriber under test and the restart of that broker.
type Start func(t *testing.T) (constructor tests.PubSubConstructor, restart func() error)

// Gate is a broker package's TestReconnectKeepsEveryDeliveredMessage: unless the test is
// -short or EnvOptIn is not 1 (then it skips before starting anything), it starts the broker,
// runs Run with a publisher and a subscriber of the constructor on a fresh topic, and closes
// both.
func Gate(t *testing.T, start Start) {
	t.Helper()
	if testing.Short() {
		t.Skip("restarts a dedicated broker twice")
	}
	if os.Getenv(EnvOptIn) != "1" {
		t.Skip("runs alone after the suite (" + EnvOptIn + "=1, set by scripts/test.sh)")
	}
	constructor, restart := start(t)
	pub, sub := constructor(t)
	defer closeAll(t, pub, sub)
	Run(t, Config{Publisher: pub, Subscriber: sub, Topic: testsupport.UniqueName("reconnect"), Restart: restart})
}

// SoakWatermill is a broker package's TestSoakWatermillReconnect: Watermill's universal
// TestReconnect with features (whose RestartServiceCommand restarts the dedicated broker) runs
// times, each in a subtest, and it logs how many of them passed on broker.
func SoakWatermill(t *testing.T, runs int, broker string, features tests.Features, constructor tests.PubSubConstructor) {
	t.Helper()
	passed := 0
	for i := range runs {
		if t.Run(fmt.Sprint(i), func(t *testing.T) {
			tests.TestReconnect(t, tests.TestContext{TestID: tests.NewTestID(), Features: features}, constructor)
		}) {
			passed++
		}
	}
	t.Logf("soak: Watermill's TestReconnect on %s passed %d of %d runs", broker, passed, runs)
}

// closeAll closes the publisher and the subscriber.
func closeAll(t *testing.T, pub message.Publisher, sub message.Subscriber) {
	t.Helper()
	if err := pub.Close(); err != nil {
		t.Errorf("close the publisher: %v", err)
	}
	if err := sub.Close(); err != nil {
		t.Errorf("close the subscriber: %v", err)
	}
}
