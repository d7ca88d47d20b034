package pulsar

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// NewClientLogger adapts a Watermill logger to pulsar-client-go's log.Logger, so the
// client's own messages go where the application's logs go instead of to logrus on stderr.
// pulsar-client-go ships only logrus and slog adapters, hence this one.
//
// Levels are shifted down one step because the client logs every connection, producer
// and consumer lifecycle event at Info: Debug -> Trace, Info -> Debug, Warn -> Info
// (with pulsar_level=warn), Error -> Error.
func NewClientLogger(logger watermill.LoggerAdapter) plog.Logger {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	return &clientLogger{logger: logger}
}

// clientLogger implements both plog.Logger and plog.Entry.
type clientLogger struct {
	logger watermill.LoggerAdapter
	fields watermill.LogFields
	err    error
	// failures, if set, records the connection failures logged (shared by derived loggers).
	failures *connFailures
}

var (
	_ plog.Logger = (*clientLogger)(nil)
	_ plog.Entry  = (*clientLogger)(nil)
)

func (l *clientLogger) with(fields plog.Fields, err error) *clientLogger {
	merged := make(watermill.LogFields, len(l.fields)+len(fields))
	for k, v := range l.fields {
		merged[k] = v
	}
	for k, v := range fields {
		merged[k] = v
	}
	if err == nil {
		err = l.err
	}
	return &clientLogger{logger: l.logger, fields: merged, err: err, failures: l.failures}
}

// SubLogger returns a logger that adds fields to every entry.
func (l *clientLogger) SubLogger(fields plog.Fields) plog.Logger { return l.with(fields, nil) }

// WithFields returns an entry with fields added.
func (l *clientLogger) WithFields(fields plog.Fields) plog.Entry { return l.with(fields, nil) }

// WithField returns an entry with one field added.
func (l *clientLogger) WithField(name string, value any) plog.Entry {
	return l.with(plog.Fields{name: value}, nil)
}

// WithError returns an entry carrying err, passed to the Watermill logger's Error.
func (l *clientLogger) WithError(err error) plog.Entry { return l.with(nil, err) }

// fieldsFor returns the entry's fields for a non-error level, with the error (if any)
// as a field, and pulsar_level when the Watermill level differs in name.
func (l *clientLogger) fieldsFor(pulsarLevel string) watermill.LogFields {
	fields := make(watermill.LogFields, len(l.fields)+2)
	for k, v := range l.fields {
		fields[k] = v
	}
	if l.err != nil {
		fields["error"] = l.err.Error()
	}
	if pulsarLevel != "" {
		fields["pulsar_level"] = pulsarLevel
	}
	return fields
}

// Debug logs at Watermill's Trace level.
func (l *clientLogger) Debug(args ...any) { l.logger.Trace(fmt.Sprint(args...), l.fieldsFor("")) }

// Info logs at Watermill's Debug level.
func (l *clientLogger) Info(args ...any) { l.logger.Debug(fmt.Sprint(args...), l.fieldsFor("")) }

// Warn logs at Watermill's Info level with pulsar_level=warn.
func (l *clientLogger) Warn(args ...any) {
	msg := fmt.Sprint(args...)
	l.failures.observe(msg, l.err)
	l.logger.Info(msg, l.fieldsFor("warn"))
}

// Error logs at Watermill's Error level.
func (l *clientLogger) Error(args ...any) {
	msg := fmt.Sprint(args...)
	l.failures.observe(msg, l.err)
	l.logger.Error(msg, l.err, l.fields)
}

// Debugf logs at Watermill's Trace level.
func (l *clientLogger) Debugf(format string, args ...any) { l.Debug(fmt.Sprintf(format, args...)) }

// Infof logs at Watermill's Debug level.
func (l *clientLogger) Infof(format string, args ...any) { l.Info(fmt.Sprintf(format, args...)) }

// Warnf logs at Watermill's Info level with pulsar_level=warn.
func (l *clientLogger) Warnf(format string, args ...any) { l.Warn(fmt.Sprintf(format, args...)) }

// Errorf logs at Watermill's Error level.
func (l *clientLogger) Errorf(format string, args ...any) { l.Error(fmt.Sprintf(format, args...)) }
