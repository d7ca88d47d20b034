package relayconfig_test

import (
	"fmt"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
)

func ExampleParse() {
	cfg, err := relayconfig.Parse([]byte(`
database:
  dialect: postgres
  dsn: postgres://relay:s3cret@db:5432/app
forwarder:
  batch_size: 500
broker: kafka
kafka:
  brokers: [kafka:9092]
`), nil, relayconfig.Options{Broker: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Database)
	fmt.Println(cfg.Forwarder.BatchSize, cfg.HTTP.Listen, cfg.Broker.Broker)

	_, err = relayconfig.Parse([]byte("database:\n  dialect: postgres\n  dsn: x\nforwarder:\n  batch_size: -1\n"), nil, relayconfig.Options{})
	fmt.Println(err)
	// Output:
	// [dialect=postgres dsn=postgres://relay:xxxxx@db:5432/app table=outbox_events]
	// 500 127.0.0.1:9464 kafka
	// forwarder.batch_size: must be positive, got -1 (line 5; leave it out for the default)
}

func ExampleRedactDSN() {
	fmt.Println(relayconfig.RedactDSN("postgres://relay:s3cret@db:5432/app?sslmode=disable"))
	fmt.Println(relayconfig.RedactDSN("relay:s3cret@tcp(db:3306)/app"))
	fmt.Println(relayconfig.RedactDSN("host=db user=relay password=s3cret"))
	// Output:
	// postgres://relay:xxxxx@db:5432/app?sslmode=disable
	// relay:xxxxx@tcp(db:3306)/app
	// host=db user=relay password=xxxxx
}

// The admin surface of a relay in a container: probes and metrics on one port, the admin API and
// console on another with TLS and client certificates, a capped database pool.
func ExampleParse_adminSurface() {
	cfg, err := relayconfig.Parse([]byte(`
database:
  dialect: postgres
  dsn: postgres://relay:s3cret@db:5432/app
  max_open_conns: 12
http:
  listen: 0.0.0.0:9464
  admin_listen: 0.0.0.0:9443
  admin_tls_cert_file: /run/tls/tls.crt
  admin_tls_key_file: /run/tls/tls.key
  admin_client_ca_file: /run/tls/ca.crt
  admin_write_tokens_file: /run/secrets/outboxkit/write.tokens
  allowed_hosts: [outboxkit-admin.example.internal]
`), nil, relayconfig.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := cfg.HTTP
	fmt.Println(h.Listen, h.AdminListen, h.AdminClientCAFile, h.AllowedHosts)
	fmt.Println(h.ReadTimeout, h.WriteTimeout, h.IdleTimeout, cfg.Database.MaxOpenConns)
	// Output:
	// 0.0.0.0:9464 0.0.0.0:9443 /run/tls/ca.crt [outboxkit-admin.example.internal]
	// 30s 1m0s 2m0s 12
}
