package testsupport

import (
	"net"
	"strconv"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// EnvRabbitMQURL is the environment variable naming the RabbitMQ node started by
// scripts/services.sh; DefaultRabbitMQURL is that script's default.
const (
	EnvRabbitMQURL     = "OUTBOXKIT_RABBITMQ_URL"
	DefaultRabbitMQURL = "amqp://outboxkit:outboxkit@127.0.0.1:15673/"
)

// RabbitMQURL returns the URL of the test RabbitMQ node of scripts/services.sh after checking
// that it accepts connections. (The fault run starts a node of its own, to restart it.)
func RabbitMQURL(t testing.TB) string {
	t.Helper()
	raw := env(EnvRabbitMQURL, DefaultRabbitMQURL)
	u, err := amqp.ParseURI(raw)
	if err != nil {
		t.Fatalf("%s is not an AMQP URL: %v", EnvRabbitMQURL, err)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)), probeTimeout)
	if err != nil {
		Unavailable(t, "RabbitMQ ("+EnvRabbitMQURL+")", err)
		return raw
	}
	_ = conn.Close()
	return raw
}
