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
