package brokerconfig

import (
	"context"
	"errors"

	"github.com/ThreeDotsLabs/watermill"
)

// errPulsarUnavailable is returned while the Pulsar adapter is not linked in.
var errPulsarUnavailable = errors.New("broker pulsar: the Pulsar adapter is not available in this build")

func validatePulsarAdapter(PulsarConfig) error { return nil }

func buildPulsar(_ context.Context, _ PulsarConfig, _ watermill.LoggerAdapter) (*Brokers, error) {
	return nil, errPulsarUnavailable
}
