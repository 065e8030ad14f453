package order

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// ErrBudgetExhausted means a lookup found its gateway's request budget
// used up and did not call the gateway. Nothing was learned, and nothing
// changed; the call may be retried shortly with the same keys.
var ErrBudgetExhausted = errors.New("the gateway's request budget is used up")

// BudgetRetryAfter is the wait a client is told to leave before retrying
// a call refused with ErrBudgetExhausted.
const BudgetRetryAfter = time.Second

// BudgetConfig is one gateway account's outbound request budget in one
// process.
type BudgetConfig struct {
	// Rate is the requests per second this process may send the account,
	// charges and lookups together. The burst is a tenth of a second's
	// worth (at least one), so that no second sees more than 1.1 × Rate.
	Rate float64
	// LookupShare is the part of Rate that lookups may use (0 < share <
	// 1): whatever lookups do, charges keep the rest.
	LookupShare float64
	// LookupWait bounds how long a lookup waits for the budget before it
	// gives up with ErrBudgetExhausted.
	LookupWait time.Duration
}

// Budget is one gateway account's outbound request budget: a token bucket
// that every charge and every lookup of this process draws from, and a
// smaller one that lookups draw from too. Lookups (a checkout polling
// GetOrder, the reconciler) can therefore never take more than their share,
// and a burst of them never delays a charge beyond what charges do to each
// other. A nil *Budget lets everything through.
type Budget struct {
	all, lookups *rate.Limiter
	wait         time.Duration
}

// NewBudget returns the budget cfg describes.
func NewBudget(cfg BudgetConfig) (*Budget, error) {
	if !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0) {
		return nil, fmt.Errorf("request budget: rate %v must be a positive number of requests per second", cfg.Rate)
	}
	if !(cfg.LookupShare > 0 && cfg.LookupShare < 1) {
		return nil, fmt.Errorf("request budget: lookup share %v must be between 0 and 1 (exclusive), so that charges keep a part", cfg.LookupShare)
	}
	if cfg.LookupWait <= 0 {
		return nil, errors.New("request budget: lookup wait must be positive")
	}
	lookupRate := cfg.Rate * cfg.LookupShare
	return &Budget{
		all:     rate.NewLimiter(rate.Limit(cfg.Rate), burst(cfg.Rate)),
		lookups: rate.NewLimiter(rate.Limit(lookupRate), burst(lookupRate)),
		wait:    cfg.LookupWait,
	}, nil
}

// burst is a tenth of a second's worth of requests at r, at least one.
func burst(r float64) int { return max(1, int(r/10)) }

// WaitCharge waits for the budget to let a charge (or a refund) go. It
// waits at most half the time ctx has left, so that the gateway call keeps
// at least half of its timeout: a call that waited out its whole deadline
// in the queue would time out at the gateway, and an outcome Settle could
// have kept certain ("not sent") would become unknown. Charges never wait
// for lookups' share: only for the tokens other charges took, and the
// lookups' share at most.
func (b *Budget) WaitCharge(ctx context.Context) error {
	if b == nil {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	if err := b.all.Wait(ctx); err != nil {
		return fmt.Errorf("%w: no charge could be sent in time to leave the gateway its timeout", ErrBudgetExhausted)
	}
	return nil
}

// WaitLookup waits, at most the budget's LookupWait, for the budget to let
// a lookup go; it returns ErrBudgetExhausted when it would have to wait
// longer. The lookup's own bucket comes first, so that a lookup waiting
// for its share holds no token that a charge could use.
func (b *Budget) WaitLookup(ctx context.Context) error {
	if b == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	if b.lookups.Wait(ctx) != nil || b.all.Wait(ctx) != nil {
		return ErrBudgetExhausted
	}
	return nil
}
