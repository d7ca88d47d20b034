package relayconfig

import (
	"fmt"
	"log/slog"
	"strings"

	"gopkg.in/yaml.v3"
)

// Log is the log section.
type Log struct {
	// Level is debug, info, warn or error. Default: info.
	Level slog.Level
	// Format is text or json. Default: text.
	Format string
}

// decode fills the section from its mapping node n.
func (l *Log) decode(n *yaml.Node) error {
	var level, format string
	if err := decodeMapping(n, "log", []field{{key: "level", target: &level}, {key: "format", target: &format}}); err != nil {
		return err
	}
	return l.parse(level, format)
}

func (l *Log) parse(level, format string) error {
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "", "info":
		l.Level = slog.LevelInfo
	case "debug":
		l.Level = slog.LevelDebug
	case "warn", "warning":
		l.Level = slog.LevelWarn
	case "error":
		l.Level = slog.LevelError
	default:
		return fmt.Errorf("log.level: unknown value %q (allowed: debug, info, warn, error)", level)
	}
	switch f := strings.ToLower(strings.TrimSpace(format)); f {
	case "", "text", "json":
		l.Format = f
	default:
		return fmt.Errorf("log.format: unknown value %q (allowed: text, json)", format)
	}
	return nil
}
