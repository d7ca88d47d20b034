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
	EnvRabbitMQURL     = "OUTBOXKIT_TEST_RABBITMQ_URL"
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

// Environment variables of the RabbitMQ node's TLS listener (scripts/services.sh env), with that
// script's defaults: its amqps:// URL, and the directory holding ca.pem (the CA that signed the
// node's certificate) and untrusted-ca.pem (a CA that signed nothing the node presents).
const (
	EnvRabbitMQTLSURL     = "OUTBOXKIT_TEST_RABBITMQ_TLS_URL"
	EnvRabbitMQTLSCA      = "OUTBOXKIT_TEST_RABBITMQ_TLS_CA"
	DefaultRabbitMQTLSURL = "amqps://outboxkit:outboxkit@127.0.0.1:15674/"
	DefaultRabbitMQTLSCA  = "/var/tmp/outboxkit-services/rabbitmq/tls"
)

// RabbitMQTLS returns the amqps:// URL of the test RabbitMQ node's TLS listener and the
// directory of its test CA files, after checking that the listener accepts connections.
func RabbitMQTLS(t testing.TB) (url, caDir string) {
	t.Helper()
	raw := env(EnvRabbitMQTLSURL, DefaultRabbitMQTLSURL)
	u, err := amqp.ParseURI(raw)
	if err != nil {
		t.Fatalf("%s is not an AMQP URL: %v", EnvRabbitMQTLSURL, err)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)), probeTimeout)
	if err != nil {
		Unavailable(t, "RabbitMQ TLS ("+EnvRabbitMQTLSURL+")", err)
		return raw, ""
	}
	_ = conn.Close()
	return raw, env(EnvRabbitMQTLSCA, DefaultRabbitMQTLSCA)
}
