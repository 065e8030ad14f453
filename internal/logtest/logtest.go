// Package logtest captures what a logger writes, for a test to read: that a
// line was logged, and that no secret was.
package logtest

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer is a log destination that many goroutines may write to at once (a
// server's handlers, a reconciler's lookups) while a test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a text logger that writes to b at every level from debug
// up, so that a test of what must never be logged sees every line.
func (b *Buffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
