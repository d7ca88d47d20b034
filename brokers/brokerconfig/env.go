package brokerconfig

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EnvBroker is the environment variable that overrides the broker key.
const EnvBroker = "OUTBOXKIT_BROKER"

// envBinding ties one environment variable to the field at a YAML path.
type envBinding struct {
	name   string // environment variable
	path   string // YAML path, used in errors
	target any    // pointer to the field
	secret bool   // never echo the value
}

// envBindings lists every environment override, in the order of docs/configuration.md. An
// override wins over the YAML file; an empty variable counts as set only for strings.
func (c *Config) envBindings() []envBinding {
	k, p := &c.Kafka, &c.Pulsar
	return append([]envBinding{
		{EnvBroker, "broker", &c.Broker, false},
		{"OUTBOXKIT_FORMAT", "format", &c.Format, false},
		{"OUTBOXKIT_CLOUDEVENTS_SOURCE", "cloudevents.source", &c.CloudEvents.Source, false},

		{"OUTBOXKIT_KAFKA_BROKERS", "kafka.brokers", &k.Brokers, false},
		{"OUTBOXKIT_KAFKA_CLIENT_ID", "kafka.client_id", &k.ClientID, false},
		{"OUTBOXKIT_KAFKA_VERSION", "kafka.version", &k.Version, false},
		{"OUTBOXKIT_KAFKA_COMPRESSION", "kafka.compression", &k.Compression, false},
		{"OUTBOXKIT_KAFKA_PARTITIONER", "kafka.partitioner", &k.Partitioner, false},
		{"OUTBOXKIT_KAFKA_KEY_METADATA", "kafka.key_metadata", &k.KeyMetadata, false},
		{"OUTBOXKIT_KAFKA_MESSAGE_MAX_BYTES", "kafka.message_max_bytes", &k.MessageMaxBytes, false},
		{"OUTBOXKIT_KAFKA_PRODUCER_RETRIES", "kafka.producer_retries", &k.ProducerRetries, false},
		{"OUTBOXKIT_KAFKA_RETRY_BACKOFF", "kafka.retry_backoff", &k.RetryBackoff, false},
		{"OUTBOXKIT_KAFKA_CONSUMER_GROUP", "kafka.consumer_group", &k.ConsumerGroup, false},
		{"OUTBOXKIT_KAFKA_INITIAL_OFFSET", "kafka.initial_offset", &k.InitialOffset, false},
		{"OUTBOXKIT_KAFKA_SESSION_TIMEOUT", "kafka.session_timeout", &k.SessionTimeout, false},
		{"OUTBOXKIT_KAFKA_HEARTBEAT_INTERVAL", "kafka.heartbeat_interval", &k.HeartbeatInterval, false},
		{"OUTBOXKIT_KAFKA_REBALANCE_TIMEOUT", "kafka.rebalance_timeout", &k.RebalanceTimeout, false},
		{"OUTBOXKIT_KAFKA_NACK_RESEND_SLEEP", "kafka.nack_resend_sleep", &k.NackResendSleep, false},
		{"OUTBOXKIT_KAFKA_ISOLATION_LEVEL", "kafka.isolation_level", &k.IsolationLevel, false},
		{"OUTBOXKIT_KAFKA_TOPIC_PARTITIONS", "kafka.topic_partitions", &k.TopicPartitions, false},
		{"OUTBOXKIT_KAFKA_TOPIC_REPLICATION_FACTOR", "kafka.topic_replication_factor", &k.TopicReplicationFactor, false},
		{"OUTBOXKIT_KAFKA_TLS_ENABLED", "kafka.tls.enabled", &k.TLS.Enabled, false},
		{"OUTBOXKIT_KAFKA_TLS_CA_FILE", "kafka.tls.ca_file", &k.TLS.CAFile, false},
		{"OUTBOXKIT_KAFKA_TLS_CERT_FILE", "kafka.tls.cert_file", &k.TLS.CertFile, false},
		{"OUTBOXKIT_KAFKA_TLS_KEY_FILE", "kafka.tls.key_file", &k.TLS.KeyFile, false},
		{"OUTBOXKIT_KAFKA_TLS_INSECURE_SKIP_VERIFY", "kafka.tls.insecure_skip_verify", &k.TLS.InsecureSkipVerify, false},
		{"OUTBOXKIT_KAFKA_SASL_MECHANISM", "kafka.sasl.mechanism", &k.SASL.Mechanism, false},
		{"OUTBOXKIT_KAFKA_SASL_USERNAME", "kafka.sasl.username", &k.SASL.Username, false},
		{"OUTBOXKIT_KAFKA_SASL_PASSWORD", "kafka.sasl.password", &k.SASL.Password, true},

		{"OUTBOXKIT_KFAKE_PARTITIONS", "kfake.partitions", &c.KFake.Partitions, false},

		{"OUTBOXKIT_PULSAR_URL", "pulsar.url", &p.URL, false},
		{"OUTBOXKIT_PULSAR_AUTH_TOKEN", "pulsar.auth_token", &p.AuthToken, true},
		{"OUTBOXKIT_PULSAR_AUTH_TOKEN_FILE", "pulsar.auth_token_file", &p.AuthTokenFile, false},
		{"OUTBOXKIT_PULSAR_TLS_TRUST_CERTS_FILE", "pulsar.tls_trust_certs_file", &p.TLSTrustCertsFile, false},
		{"OUTBOXKIT_PULSAR_TLS_ALLOW_INSECURE_CONNECTION", "pulsar.tls_allow_insecure_connection", &p.TLSAllowInsecureConnection, false},
		{"OUTBOXKIT_PULSAR_TLS_SKIP_HOSTNAME_VERIFICATION", "pulsar.tls_skip_hostname_verification", &p.TLSSkipHostnameVerification, false},
		{"OUTBOXKIT_PULSAR_TLS_VALIDATE_HOSTNAME", "pulsar.tls_validate_hostname", &p.TLSValidateHostname, false},
		{"OUTBOXKIT_PULSAR_TLS_CERT_FILE", "pulsar.tls_cert_file", &p.TLSCertFile, false},
		{"OUTBOXKIT_PULSAR_TLS_KEY_FILE", "pulsar.tls_key_file", &p.TLSKeyFile, false},
		{"OUTBOXKIT_PULSAR_OPERATION_TIMEOUT", "pulsar.operation_timeout", &p.OperationTimeout, false},
		{"OUTBOXKIT_PULSAR_CONNECTION_TIMEOUT", "pulsar.connection_timeout", &p.ConnectionTimeout, false},
		{"OUTBOXKIT_PULSAR_TENANT", "pulsar.tenant", &p.Tenant, false},
		{"OUTBOXKIT_PULSAR_NAMESPACE", "pulsar.namespace", &p.Namespace, false},
		{"OUTBOXKIT_PULSAR_KEY_METADATA", "pulsar.key_metadata", &p.KeyMetadata, false},
		{"OUTBOXKIT_PULSAR_SEND_TIMEOUT", "pulsar.send_timeout", &p.SendTimeout, false},
		{"OUTBOXKIT_PULSAR_MAX_PENDING_MESSAGES", "pulsar.max_pending_messages", &p.MaxPendingMessages, false},
		{"OUTBOXKIT_PULSAR_DISABLE_BATCHING", "pulsar.disable_batching", &p.DisableBatching, false},
		{"OUTBOXKIT_PULSAR_BATCHING_MAX_PUBLISH_DELAY", "pulsar.batching_max_publish_delay", &p.BatchingMaxPublishDelay, false},
		{"OUTBOXKIT_PULSAR_BATCHING_MAX_MESSAGES", "pulsar.batching_max_messages", &p.BatchingMaxMessages, false},
		{"OUTBOXKIT_PULSAR_BATCHING_MAX_SIZE", "pulsar.batching_max_size", &p.BatchingMaxSize, false},
		{"OUTBOXKIT_PULSAR_MIXED_KEY_BATCHES", "pulsar.mixed_key_batches", &p.MixedKeyBatches, false},
		{"OUTBOXKIT_PULSAR_COMPRESSION", "pulsar.compression", &p.Compression, false},
		{"OUTBOXKIT_PULSAR_SUBSCRIPTION_NAME", "pulsar.subscription_name", &p.SubscriptionName, false},
		{"OUTBOXKIT_PULSAR_SUBSCRIPTION_TYPE", "pulsar.subscription_type", &p.SubscriptionType, false},
		{"OUTBOXKIT_PULSAR_INITIAL_POSITION", "pulsar.initial_position", &p.InitialPosition, false},
		{"OUTBOXKIT_PULSAR_NACK_REDELIVERY_DELAY", "pulsar.nack_redelivery_delay", &p.NackRedeliveryDelay, false},
		{"OUTBOXKIT_PULSAR_RECEIVER_QUEUE_SIZE", "pulsar.receiver_queue_size", &p.ReceiverQueueSize, false},
		{"OUTBOXKIT_PULSAR_CONSUMER_NAME", "pulsar.consumer_name", &p.ConsumerName, false},
		{"OUTBOXKIT_PULSAR_DEAD_LETTER_MAX_DELIVERIES", "pulsar.dead_letter.max_deliveries", &deadLetterField{p, true}, false},
		{"OUTBOXKIT_PULSAR_DEAD_LETTER_TOPIC", "pulsar.dead_letter.topic", &deadLetterField{p, false}, false},
	}, append(append(c.natsEnvBindings(), c.rabbitMQEnvBindings()...), c.schemaRegistryEnvBindings()...)...)
}

// deadLetterField sets a field of the optional pulsar.dead_letter section, creating it.
type deadLetterField struct {
	p             *PulsarConfig
	maxDeliveries bool
}

// EnvNames returns the name of every environment variable that overrides a configuration key.
func EnvNames() []string {
	var c Config
	b := c.envBindings()
	names := make([]string, len(b))
	for i := range b {
		names[i] = b[i].name
	}
	return names
}

// AppliedEnv returns the names of the variables of EnvNames that lookupEnv reports set, in
// EnvNames' order: the overrides Parse applies. Names only, so a caller can log them (values may
// be secrets). A nil lookupEnv gives none.
func AppliedEnv(lookupEnv func(string) (string, bool)) []string {
	if lookupEnv == nil {
		return nil
	}
	var set []string
	for _, name := range EnvNames() {
		if _, ok := lookupEnv(name); ok {
			set = append(set, name)
		}
	}
	return set
}

// nameEnvInError adds the variable to a validation error about a key that an environment
// variable set, since the file may not even have that key: "OUTBOXKIT_X (key): key: ...".
func (c *Config) nameEnvInError(err error, lookup func(string) (string, bool)) error {
	if err == nil || lookup == nil {
		return err
	}
	msg := err.Error()
	for _, b := range c.envBindings() {
		if _, ok := lookup(b.name); !ok {
			continue
		}
		if strings.HasPrefix(msg, b.path+":") || strings.HasPrefix(msg, b.path+" ") {
			return fmt.Errorf("%s (%s): %w", b.name, b.path, err)
		}
	}
	return err
}

func (c *Config) applyEnv(lookup func(string) (string, bool)) error {
	for _, b := range c.envBindings() {
		raw, ok := lookup(b.name)
		if !ok {
			continue
		}
		if err := setFromEnv(b.target, strings.TrimSpace(raw)); err != nil {
			shown := fmt.Sprintf("%q", raw)
			if b.secret {
				shown = "(secret value hidden)"
			}
			return fmt.Errorf("%s (%s): %s %w", b.name, b.path, shown, err)
		}
	}
	return nil
}

func setFromEnv(target any, raw string) error {
	switch t := target.(type) {
	case *string:
		*t = raw
	case *[]string:
		*t = nil
		for _, part := range strings.Split(raw, ",") {
			if part = strings.TrimSpace(part); part != "" {
				*t = append(*t, part)
			}
		}
	case *bool:
		v, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("is not a boolean (true/false)")
		}
		*t = v
	case *int:
		v, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("is not an integer")
		}
		*t = v
	case *int32:
		v, err := strconv.ParseInt(raw, 10, 32)
		if err != nil {
			return fmt.Errorf("is not a 32-bit integer")
		}
		*t = int32(v)
	case *int16:
		v, err := strconv.ParseInt(raw, 10, 16)
		if err != nil {
			return fmt.Errorf("is not a 16-bit integer")
		}
		*t = int16(v)
	case *uint:
		v, err := strconv.ParseUint(raw, 10, 0)
		if err != nil {
			return fmt.Errorf("is not a non-negative integer")
		}
		*t = uint(v)
	case *time.Duration:
		v, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("is not a duration like 250ms or 5s")
		}
		*t = v
	case *deadLetterField:
		if t.p.DeadLetter == nil {
			t.p.DeadLetter = &PulsarDeadLetter{}
		}
		if !t.maxDeliveries {
			t.p.DeadLetter.Topic = raw
			return nil
		}
		v, err := strconv.ParseUint(raw, 10, 32)
		if err != nil {
			return fmt.Errorf("is not a non-negative 32-bit integer")
		}
		t.p.DeadLetter.MaxDeliveries = uint32(v)
	default:
		return fmt.Errorf("cannot be set from the environment (internal error: %T)", target)
	}
	return nil
}
