package audit

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// Schedule is what a Scheduler audits, and how often.
type Schedule struct {
	// Merchants are the merchants audited.
	Merchants []string
	// Window is the length of each window (a day, say). Windows follow
	// each other with no gap, each starting where the account's last
	// audited window ended; their listings overlap by twice the
	// Auditor's margin, and findings seen twice are one.
	Window time.Duration
	// Interval is how often the Scheduler looks for closed windows.
	Interval time.Duration
	// Actor is who the runs are recorded as started by.
	Actor string
}

// ReportLister is a gateway whose listing answers from reports that trail
// the present (Adyen's daily reports, generated after each day ends):
// ListedUntil is the end of what its reports can hold at now. The
// Scheduler audits its windows only once their listing ends by then, so
// that a window is not tried, and failed, every round until its report
// exists. An audit asked for by hand is not held back: its run fails
// until the report exists, and resumes.
type ReportLister interface {
	order.ChargeLister
	ListedUntil(now time.Time) time.Time
}

// Scheduler audits every gateway account of each merchant over each window
// that has closed since the account's last audited one: the background
// loop of settle reconcile.
type Scheduler struct {
	a   *Auditor
	s   Schedule
	log *slog.Logger
}

// NewScheduler returns a Scheduler of a's gateway accounts.
func NewScheduler(a *Auditor, s Schedule) (*Scheduler, error) {
	if s.Window <= 0 || s.Interval <= 0 || len(s.Merchants) == 0 {
		return nil, errors.New("audit schedule: window and interval must be positive, and a merchant named")
	}
	if s.Actor == "" {
		s.Actor = "audit-schedule"
	}
	return &Scheduler{a: a, s: s, log: a.log}, nil
}

// Run calls RunOnce at once and then every Interval until ctx ends; a
// failed round is logged, and the next tries again from the checkpoints.
func (s *Scheduler) Run(ctx context.Context) error {
	t := time.NewTicker(s.s.Interval)
	defer t.Stop()
	for {
		if _, err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.LogAttrs(ctx, slog.LevelError, "audit round failed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce audits each merchant's gateway accounts over every window closed
// (and, for a ReportLister, reported) since their last audited one, oldest
// first, and returns the runs. The
// first window of an account never audited is the latest closed one. An
// account that fails is reported and the others are still audited.
func (s *Scheduler) RunOnce(ctx context.Context) ([]Run, error) {
	now := s.a.cfg.Now()
	var (
		runs []Run
		errs []error
	)
	for _, m := range s.s.Merchants {
		for _, gw := range slices.Sorted(maps.Keys(s.a.gateways)) {
			closed := s.a.ClosedBy(now)
			if rl, ok := s.a.gateways[gw].(ReportLister); ok {
				// The listing reaches the margin past the window's end.
				if until := rl.ListedUntil(now).Add(-s.a.cfg.Margin); until.Before(closed) {
					closed = until
				}
			}
			from, err := s.next(ctx, m, gw, closed)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for ; !from.Add(s.s.Window).After(closed) && ctx.Err() == nil; from = from.Add(s.s.Window) {
				r, err := s.a.Audit(ctx, m, gw, Window{From: from, To: from.Add(s.s.Window)}, s.s.Actor)
				if err != nil {
					errs = append(errs, err)
					break // the next round resumes this window
				}
				runs = append(runs, r)
			}
		}
	}
	return runs, errors.Join(errs...)
}

// next is the start of the next window of merchantID's gateway account.
func (s *Scheduler) next(ctx context.Context, merchantID, gateway string, closed time.Time) (time.Time, error) {
	last, err := s.a.store.LastRun(ctx, merchantID, gateway)
	switch {
	case errors.Is(err, order.ErrNotFound):
		return closed.Truncate(s.s.Window).Add(-s.s.Window), nil
	case err != nil:
		return time.Time{}, err
	}
	return last.Window.To, nil
}
