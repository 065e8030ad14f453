package stripe

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// leveledLogger hands stripe-go's log lines to a slog.Logger, with the
// secret key scrubbed. stripe-go logs every request, retry and error; the
// adapter's callers log each call's outcome and error already, so its lines
// go out at DEBUG, except the retries it starts, at INFO. Its Debugf lines
// (whole response bodies, client secrets included) are dropped.
type leveledLogger struct {
	log *slog.Logger
	key string
}

func (l leveledLogger) Debugf(string, ...any) {}

func (l leveledLogger) Infof(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }

func (l leveledLogger) Warnf(format string, v ...any) { l.emit(slog.LevelInfo, format, v) }

func (l leveledLogger) Errorf(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }

func (l leveledLogger) emit(level slog.Level, format string, v []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	msg := strings.ReplaceAll(fmt.Sprintf(format, v...), l.key, "[redacted]")
	l.log.LogAttrs(ctx, level, "stripe-go: "+msg)
}
