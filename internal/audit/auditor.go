package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// Config is how an Auditor audits.
type Config struct {
	// NoShowHorizon is the longest time a charge request can still reach
	// the gateway after Settle made its attempt (the reconciler's); a
	// window is audited only once it ended NoShowHorizon + Margin ago.
	NoShowHorizon time.Duration
	// Margin widens each listing on both sides of its window, for the
	// gateway's clock and the time a request takes to arrive; successive
	// windows' listings overlap by it. Default one minute.
	Margin time.Duration
	// PageSize is how many of the gateway's records are matched in one
	// transaction. Default 500.
	PageSize int
	// Now is the clock that says which windows are closed. Default
	// time.Now.
	Now func() time.Time
	// Observe, when set, is told what each step of a run found (the
	// metrics' counters).
	Observe func(r Run, found []Found)
	// Finished, when set, is told of each run that finished, covered or
	// not.
	Finished func(r Run)
}

// Auditor runs audits.
type Auditor struct {
	store    Store
	gateways map[string]order.Gateway
	cfg      Config
	log      *slog.Logger
}

// New returns an Auditor of the gateways, by account name, on store.
func New(store Store, gateways map[string]order.Gateway, cfg Config, log *slog.Logger) (*Auditor, error) {
	if cfg.NoShowHorizon < 0 || cfg.Margin < 0 || cfg.PageSize < 0 {
		return nil, errors.New("audit: no-show horizon, margin and page size must not be negative")
	}
	if cfg.Margin == 0 {
		cfg.Margin = time.Minute
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 500
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Auditor{store: store, gateways: gateways, cfg: cfg, log: log}, nil
}

// ErrWindowOpen refuses a window that is not closed yet: a charge Settle
// asked for in it may still reach the gateway.
var ErrWindowOpen = errors.New("audit: the window is not closed yet")

// ErrUnknownGateway refuses an audit of a gateway account that is not
// configured.
var ErrUnknownGateway = errors.New("audit: no such gateway account")

// ClosedBy is the latest end of a window that may be audited at now.
func (a *Auditor) ClosedBy(now time.Time) time.Time {
	return now.Add(-a.cfg.NoShowHorizon - a.cfg.Margin)
}

// Audit audits merchantID's gateway account over w for actor, resuming
// the window's unfinished run if there is one, and returns the finished
// run. A gateway that offers no listing makes a run that is not covered.
func (a *Auditor) Audit(ctx context.Context, merchantID, gateway string, w Window, actor string) (Run, error) {
	gw, ok := a.gateways[gateway]
	if !ok {
		return Run{}, fmt.Errorf("%w: %q", ErrUnknownGateway, gateway)
	}
	if !w.From.Before(w.To) {
		return Run{}, &order.ValidationError{Field: "window", Reason: "must start before it ends"}
	}
	if w.To.After(a.ClosedBy(a.cfg.Now())) {
		return Run{}, fmt.Errorf("%w: it ends at %s, and only windows ending by %s are closed", ErrWindowOpen,
			w.To.UTC().Format(time.RFC3339), a.ClosedBy(a.cfg.Now()).UTC().Format(time.RFC3339))
	}
	lister, covered := gw.(order.ChargeLister)
	r := Run{MerchantID: merchantID, ID: order.NewID(), Gateway: gateway, Window: w, Margin: a.cfg.Margin,
		Phase: PhaseCharges, Covered: covered, Actor: actor}
	if !covered {
		r.Phase, r.NotCovered = PhaseDone, fmt.Sprintf("gateway account %s offers no listing of its charges", gateway)
	}
	r, err := a.store.StartRun(ctx, r)
	if err != nil {
		return Run{}, fmt.Errorf("audit %s of %s: start: %w", gateway, merchantID, err)
	}
	if !r.Covered {
		a.log.LogAttrs(ctx, slog.LevelWarn, "audit not covered", slog.String("merchant_id", merchantID),
			slog.String("gateway", gateway), slog.String("reason", r.NotCovered))
		a.finished(r)
		return r, nil
	}
	if r, err = a.run(ctx, lister, r); err != nil {
		return r, fmt.Errorf("audit %s of %s, run %s: %w", gateway, merchantID, r.ID, err)
	}
	a.log.LogAttrs(ctx, slog.LevelInfo, "audit finished", slog.String("merchant_id", merchantID),
		slog.String("gateway", gateway), slog.String("run_id", r.ID), slog.Time("from", w.From), slog.Time("to", w.To),
		slog.Int64("seen", r.Seen), slog.Any("counts", r.Counts))
	a.finished(r)
	return r, nil
}

// run takes r from its phase and cursor to its end.
func (a *Auditor) run(ctx context.Context, lister order.ChargeLister, r Run) (Run, error) {
	var err error
	if r.Phase == PhaseCharges {
		if r, err = a.listCharges(ctx, lister, r); err != nil {
			return r, err
		}
		if r, err = a.store.NextPhase(ctx, r, PhaseRefunds); err != nil {
			return r, err
		}
	}
	if r.Phase == PhaseRefunds {
		if r, err = a.listRefunds(ctx, lister, r); err != nil {
			return r, err
		}
		if r, err = a.store.NextPhase(ctx, r, PhaseMissing); err != nil {
			return r, err
		}
	}
	if r.Phase == PhaseMissing {
		var found []Found
		if r, found, err = a.store.FinishRun(ctx, r, charged); err != nil {
			return r, err
		}
		a.observe(r, found)
	}
	return r, nil
}

// listCharges matches the gateway's charges after r's cursor, a page at a
// time.
func (a *Auditor) listCharges(ctx context.Context, lister order.ChargeLister, r Run) (Run, error) {
	start := r.Cursor
	err := pipeline(ctx, a.cfg.PageSize, func(ctx context.Context, add func(order.GatewayCharge) error) error {
		return lister.ListCharges(ctx, a.resumeAt(r), r.Listed().To, func(c order.GatewayCharge) error {
			if !start.After(c.Created, c.ID) {
				return nil // matched before the run stopped
			}
			return add(c)
		})
	}, func(page []order.GatewayCharge) error {
		next, found, err := a.store.MatchCharges(ctx, r, page, charged)
		if err != nil {
			return err
		}
		r = next
		a.observe(r, found)
		return nil
	})
	return r, err
}

// listRefunds is listCharges for refunds.
func (a *Auditor) listRefunds(ctx context.Context, lister order.ChargeLister, r Run) (Run, error) {
	start := r.Cursor
	err := pipeline(ctx, a.cfg.PageSize, func(ctx context.Context, add func(order.GatewayRefund) error) error {
		return lister.ListRefunds(ctx, a.resumeAt(r), r.Listed().To, func(rf order.GatewayRefund) error {
			if !start.After(rf.Created, rf.ID) {
				return nil
			}
			return add(rf)
		})
	}, func(page []order.GatewayRefund) error {
		next, found, err := a.store.MatchRefunds(ctx, r, page)
		if err != nil {
			return err
		}
		r = next
		a.observe(r, found)
		return nil
	})
	return r, err
}

// pipeline runs list, which adds the gateway's records in listing order,
// and hands them to match a page of size at a time, in that order, while
// list goes on: the gateway's answer for the next page and the database's
// work on this one overlap. A page is matched once listed in full, the
// last one as the listing ends; an error of match stops the listing, and
// one of list comes after every page listed before it was matched.
func pipeline[T any](ctx context.Context, size int, list func(context.Context, func(T) error) error, match func([]T) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []T, 1)
	listed := make(chan error, 1)
	go func() {
		defer close(pages)
		send := func(page []T) error {
			select {
			case pages <- page:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		page := make([]T, 0, size)
		err := list(ctx, func(x T) error {
			if err := ctx.Err(); err != nil {
				return err // match failed: list no further
			}
			if page = append(page, x); len(page) < size {
				return nil
			}
			err := send(page)
			page = make([]T, 0, size)
			return err
		})
		if err == nil && len(page) > 0 {
			err = send(page)
		}
		listed <- err
	}()
	for page := range pages {
		if err := match(page); err != nil {
			cancel()
			for range pages {
			}
			return err
		}
	}
	return <-listed
}

// resumeAt is where r's listing (re)starts: its start, or its cursor's
// creation time (the records there up to the cursor's id are skipped).
func (a *Auditor) resumeAt(r Run) time.Time {
	if r.Cursor.Created.IsZero() {
		return r.Listed().From
	}
	return r.Cursor.Created
}

func (a *Auditor) finished(r Run) {
	if a.cfg.Finished != nil {
		a.cfg.Finished(r)
	}
}

func (a *Auditor) observe(r Run, found []Found) {
	if a.cfg.Observe != nil && len(found) > 0 {
		a.cfg.Observe(r, found)
	}
}

// Runs returns merchantID's runs, the latest first, at most limit.
func (a *Auditor) Runs(ctx context.Context, merchantID string, limit int) ([]Run, error) {
	return a.store.Runs(ctx, merchantID, limit)
}
