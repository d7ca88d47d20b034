package brokerconfig

// schemaRegistryEnvBindings are the OUTBOXKIT_SCHEMA_REGISTRY_* overrides of the schema_registry
// section.
func (c *Config) schemaRegistryEnvBindings() []envBinding {
	r := &c.SchemaRegistry
	return []envBinding{
		{"OUTBOXKIT_SCHEMA_REGISTRY_URL", "schema_registry.url", &r.URL, false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_SUBJECT_STRATEGY", "schema_registry.subject_strategy", (*string)(&r.SubjectStrategy), false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_VERSION", "schema_registry.version", &r.Version, false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_LATEST_TTL", "schema_registry.latest_ttl", &r.LatestTTL, false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_SERVER_ERROR_BOUND", "schema_registry.server_error_bound", &r.ServerErrorBound, false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_REGISTER", "schema_registry.register", &r.Register, false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_CACHE_SIZE", "schema_registry.cache_size", &r.CacheSize, false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_USERNAME", "schema_registry.username", &r.Username, false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_PASSWORD", "schema_registry.password", &r.Password, true},
		{"OUTBOXKIT_SCHEMA_REGISTRY_BEARER_TOKEN", "schema_registry.bearer_token", &r.BearerToken, true},
		{"OUTBOXKIT_SCHEMA_REGISTRY_TLS_CA_FILE", "schema_registry.tls.ca_file", &r.TLS.CAFile, false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_TLS_CERT_FILE", "schema_registry.tls.cert_file", &r.TLS.CertFile, false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_TLS_KEY_FILE", "schema_registry.tls.key_file", &r.TLS.KeyFile, false},
		{"OUTBOXKIT_SCHEMA_REGISTRY_TLS_INSECURE_SKIP_VERIFY", "schema_registry.tls.insecure_skip_verify", &r.TLS.InsecureSkipVerify, false},
	}
}
