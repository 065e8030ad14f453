package stripe

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// leveledLogger hands stripe-go's log lines to a slog.Logger, with the
// secret key and Customer ids scrubbed. stripe-go logs every request, retry and error; the
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
	l.log.LogAttrs(ctx, level, "stripe-go: "+scrub(fmt.Sprintf(format, v...), l.key))
}

// customerID matches a Stripe Customer id.
var customerID = regexp.MustCompile(`cus_[A-Za-z0-9]+`)

// scrub removes the secret key and every Customer id from s. A Customer
// id names a person's saved card: like the key, it stays out of errors
// and logs (Stripe quotes one it does not know in its error message).
func scrub(s, key string) string {
	return customerID.ReplaceAllString(strings.ReplaceAll(s, key, "[redacted]"), "cus_[redacted]")
}
