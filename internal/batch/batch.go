// Package batch lets concurrent calls share one operation, as PostgreSQL's
// group commit lets transactions share a WAL flush: one operation is in
// flight at a time, and the calls that arrive meanwhile wait and go
// together in the next one, which the first of them leads. A call alone
// runs at once, so nothing waits when there is no load; under load a call
// waits at most for the operation in progress, and many calls share its
// round trip and its commit.
//
// The storage runs its settle statement through a Batcher; refunds and
// events can run theirs the same way.
package batch

import (
	"context"
	"fmt"
	"sync"
)

// Config says how a Batcher runs its groups.
type Config[K comparable, In, Out any] struct {
	// Run runs one group of inputs as one operation. It returns one output
	// per input, in the same order, or an error that fails the group.
	Run func(ctx context.Context, ins []In) ([]Out, error)
	// Key names what an input is about (an order, say): a group never holds
	// two inputs with one key, so that an operation never has to choose
	// between two changes of one thing. The later waits for the next group.
	Key func(In) K
	// MaxSize bounds the inputs in one group (at least 1).
	MaxSize int
	// Isolate reports whether the calls of a group that failed with err are
	// each run again alone, so that an input that makes the operation fail
	// fails only its own call. It should be false for errors that would
	// fail every call alone too (the database is unreachable). Nil means
	// always.
	Isolate func(err error) bool
}

// Batcher groups concurrent calls; see the package comment. Its zero value
// is not usable: make one with New.
type Batcher[K comparable, In, Out any] struct {
	cfg     Config[K, In, Out]
	mu      sync.Mutex
	running bool                // a leader is running a group; queue waits for it
	queue   []*call[K, In, Out] // invariant: empty whenever running is false
}

// call is one Do waiting in a Batcher.
type call[K comparable, In, Out any] struct {
	in  In
	out Out
	err error
	// done says that out and err are set; a wake without done means "lead
	// the next group". Each call is woken at most once.
	done bool
	wake chan struct{}
}

// New returns a Batcher that runs groups as cfg says.
func New[K comparable, In, Out any](cfg Config[K, In, Out]) *Batcher[K, In, Out] {
	if cfg.Run == nil || cfg.Key == nil || cfg.MaxSize < 1 {
		panic("batch: Config needs Run, Key and a MaxSize of at least 1")
	}
	if cfg.Isolate == nil {
		cfg.Isolate = func(error) bool { return true }
	}
	return &Batcher[K, In, Out]{cfg: cfg}
}

// Do runs in, in a group with whatever other calls are waiting, and returns
// its output. It runs at once when no group is in flight; otherwise it
// waits for the group in flight, and then for its own. A call that leads a
// group runs it with ctx's values but without its cancellation: the other
// calls of the group are waiting for it.
func (b *Batcher[K, In, Out]) Do(ctx context.Context, in In) (Out, error) {
	c := &call[K, In, Out]{in: in, wake: make(chan struct{}, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	lead := !b.running
	b.running = true
	b.mu.Unlock()
	if !lead {
		<-c.wake
		if c.done {
			return c.out, c.err
		}
	}
	// Lead: c is first in the queue. Take it and those behind it, one per
	// key, up to MaxSize; the rest wait for the next group.
	b.mu.Lock()
	var (
		group []*call[K, In, Out]
		rest  []*call[K, In, Out]
		seen  = make(map[K]bool)
	)
	for _, q := range b.queue {
		if k := b.cfg.Key(q.in); len(group) < b.cfg.MaxSize && !seen[k] {
			seen[k] = true
			group = append(group, q)
		} else {
			rest = append(rest, q)
		}
	}
	b.queue = rest
	b.mu.Unlock()

	b.runGroup(context.WithoutCancel(ctx), group)
	for _, q := range group {
		if q != c {
			q.wake <- struct{}{}
		}
	}
	// Hand the lead to the first call that waits, if any.
	b.mu.Lock()
	if len(b.queue) > 0 {
		next := b.queue[0]
		b.mu.Unlock()
		next.wake <- struct{}{}
	} else {
		b.running = false
		b.mu.Unlock()
	}
	return c.out, c.err
}

// runGroup runs a group and sets each call's result. If the group fails
// and has several calls, each is run again alone (when Isolate allows), so
// that no call fails for another's sake.
func (b *Batcher[K, In, Out]) runGroup(ctx context.Context, group []*call[K, In, Out]) {
	ins := make([]In, len(group))
	for i, q := range group {
		ins[i] = q.in
	}
	outs, err := b.cfg.Run(ctx, ins)
	if err == nil && len(outs) != len(ins) {
		err = fmt.Errorf("batch: Run returned %d outputs for %d inputs", len(outs), len(ins))
	}
	if err != nil && len(group) > 1 && b.cfg.Isolate(err) {
		for _, q := range group {
			b.runGroup(ctx, []*call[K, In, Out]{q})
		}
		return
	}
	for i, q := range group {
		q.done = true
		if q.err = err; err == nil {
			q.out = outs[i]
		}
	}
}
