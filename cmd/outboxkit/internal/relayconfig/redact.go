package relayconfig

import (
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Redacted replaces secrets in printed configuration.
const Redacted = "xxxxx"

// keyValuePassword matches password=... in a libpq key/value DSN or a URL query.
var keyValuePassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:\\.|[^'\\])*'|[^\s&]*)`)

// RedactDSN returns dsn with its password replaced by Redacted, for every DSN form the CLI's
// drivers take: URLs (postgres://user:pass@host/db?password=...), libpq key/value strings
// (host=... password=...) and go-sql-driver/mysql's user:pass@tcp(host)/db.
func RedactDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "(unparsable DSN, hidden)"
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Redacted)
		}
		out := u.String()
		return keyValuePassword.ReplaceAllString(out, "${1}"+Redacted)
	}
	if keyValuePassword.MatchString(dsn) {
		return keyValuePassword.ReplaceAllString(dsn, "${1}"+Redacted)
	}
	if user, rest, ok := mysqlUserInfo(dsn); ok {
		name, _, hasPass := strings.Cut(user, ":")
		if hasPass {
			return name + ":" + Redacted + "@" + rest
		}
	}
	return dsn
}

// mysqlUserInfo splits a go-sql-driver/mysql DSN at the @ that ends its user:password part.
func mysqlUserInfo(dsn string) (userinfo, rest string, ok bool) {
	// The address part (tcp(host:port)/db?params) follows the last @ before the first '/'.
	slash := strings.Index(dsn, "/")
	if slash < 0 {
		slash = len(dsn)
	}
	at := strings.LastIndex(dsn[:slash], "@")
	if at < 0 {
		return "", "", false
	}
	return dsn[:at], dsn[at+1:], true
}

// dsnPasswords returns the password of dsn in the forms it may be printed in (as written and
// decoded), for scrubbing messages that might echo it.
func dsnPasswords(dsn string) []string {
	var out []string
	if strings.Contains(dsn, "://") {
		if u, err := url.Parse(dsn); err == nil {
			if p, ok := u.User.Password(); ok {
				out = append(out, p, url.PathEscape(p), url.QueryEscape(p))
			}
			if p := u.Query().Get("password"); p != "" {
				out = append(out, p, url.QueryEscape(p))
			}
		}
	} else if m := keyValuePassword.FindStringSubmatch(dsn); m != nil {
		out = append(out, m[2], strings.Trim(m[2], "'"))
	} else if user, _, ok := mysqlUserInfo(dsn); ok {
		if _, p, has := strings.Cut(user, ":"); has {
			out = append(out, p)
		}
	}
	return out
}

// urlUserinfo matches the user:password@ part of a URL.
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^@\s/]*@`)

// Scrubber returns a function that removes the configuration's secrets from a message (an error
// or a log line) that may echo them: DSN-shaped passwords (URL userinfo, password=...) are
// always redacted, and each secret value (the DSN password, the Kafka SASL password, the Pulsar
// token, the NATS password or token, the RabbitMQ password) is replaced wherever it appears, unless it is shorter than 6 bytes or also appears as
// a non-secret value of the configuration (a password equal to the user name cannot be replaced
// everywhere without mangling ordinary text; the DSN-shaped rules still catch it).
func (c Config) Scrubber() func(string) string {
	public := c.String() // secrets redacted
	var literal []string
	candidates := append(dsnPasswords(c.Database.DSN), c.Broker.Kafka.SASL.Password, c.Broker.Pulsar.AuthToken,
		c.Broker.NATS.Password, c.Broker.NATS.Token, c.Broker.RabbitMQ.Password)
	for _, s := range candidates {
		if len(s) >= 6 && !strings.Contains(public, s) && !slices.Contains(literal, s) {
			literal = append(literal, s)
		}
	}
	dsn, redactedDSN := c.Database.DSN, RedactDSN(c.Database.DSN)
	return func(msg string) string {
		if dsn != "" && dsn != redactedDSN {
			msg = strings.ReplaceAll(msg, dsn, redactedDSN)
		}
		msg = urlUserinfo.ReplaceAllString(msg, "${1}"+Redacted+"@")
		msg = keyValuePassword.ReplaceAllString(msg, "${1}"+Redacted)
		for _, s := range literal {
			msg = strings.ReplaceAll(msg, s, Redacted)
		}
		return msg
	}
}

// LogValue implements slog.LogValuer: the database section with the DSN redacted and the broker
// part as brokerconfig prints it (secrets redacted).
func (d Database) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("dialect", string(d.Dialect)),
		slog.String("dsn", RedactDSN(d.DSN)),
		slog.String("table", d.Table),
	)
}

// LogValue implements slog.LogValuer with every secret redacted.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Any("database", c.Database.LogValue())}
	if c.Broker.Broker != "" {
		attrs = append(attrs, slog.Any("broker", c.Broker.LogValue()))
	}
	attrs = append(attrs, slog.Any("forwarder", c.Forwarder.LogValue()), slog.String("http.listen", c.HTTP.Listen))
	if c.HTTP.AdminReadTokensFile != "" || c.HTTP.AdminWriteTokensFile != "" {
		attrs = append(attrs, slog.String("http.admin_read_tokens_file", c.HTTP.AdminReadTokensFile),
			slog.String("http.admin_write_tokens_file", c.HTTP.AdminWriteTokensFile))
	}
	attrs = append(attrs, slog.String("log.level", c.Log.Level.String()), slog.String("log.format", c.Log.Format))
	return slog.GroupValue(attrs...)
}

// LogValue implements slog.LogValuer: the keys set in the forwarder section (it holds no
// secret); the others keep the forwarder's defaults.
func (f Forwarder) LogValue() slog.Value {
	var attrs []slog.Attr
	str := func(key, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(key, v))
		}
	}
	num := func(key string, v int) {
		if v != 0 {
			attrs = append(attrs, slog.Int(key, v))
		}
	}
	dur := func(key string, v time.Duration) {
		if v != 0 {
			attrs = append(attrs, slog.Duration(key, v))
		}
	}
	str("source", f.Source)
	str("delivery", f.Delivery)
	num("batch_size", f.BatchSize)
	num("max_batch_bytes", f.MaxBatchBytes)
	num("workers", f.Workers)
	num("max_attempts", f.MaxAttempts)
	if f.UnlimitedRetries {
		attrs = append(attrs, slog.Bool("unlimited_retries", true))
	}
	dur("initial_interval", f.InitialInterval)
	dur("max_interval", f.MaxInterval)
	str("dead_letter_topic", f.DeadLetterTopic)
	dur("retention", f.Retention)
	dur("prune_interval", f.PruneInterval)
	dur("lease_ttl", f.LeaseTTL)
	dur("publish_stall_after", f.PublishStallAfter)
	if len(f.Tenants) > 0 {
		attrs = append(attrs, slog.Any("tenants", f.Tenants))
	}
	str("lease_group", f.LeaseGroup)
	str("relay_id", f.RelayID)
	dur("min_poll_interval", f.MinPollInterval)
	dur("max_poll_interval", f.MaxPollInterval)
	str("checkpoint_topic", f.CheckpointTopic)
	str("transactional_id_prefix", f.TransactionalIDPrefix)
	num("transactional_units", f.TransactionalUnits)
	return slog.GroupValue(attrs...)
}

// String prints the configuration with secrets redacted.
func (c Config) String() string { return c.LogValue().String() }

// GoString is String, so %#v redacts too.
func (c Config) GoString() string { return c.String() }

// String prints the section with the DSN redacted.
func (d Database) String() string { return d.LogValue().String() }

// GoString is String, so %#v redacts too.
func (d Database) GoString() string { return d.String() }
