package chaos

import (
	"slices"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/failpoint"
)

func TestPlanIsAFunctionOfTheSeed(t *testing.T) {
	cfg := Config{Seed: 42, Duration: 90 * time.Second}
	a, err := Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Plan(cfg)
	if !slices.Equal(a, b) {
		t.Fatal("two plans of one seed differ")
	}
	cfg.Seed = 43
	if c, _ := Plan(cfg); slices.Equal(a, c) {
		t.Fatal("two seeds give the same plan")
	}

	lo, hi := cfg.freezeBounds()
	kinds := map[FaultKind]int{}
	armed := map[string]int{}
	for i, f := range a {
		kinds[f.Kind]++
		if i > 0 && f.At < a[i-1].At {
			t.Errorf("fault %d (%s) comes before the one preceding it", i, f)
		}
		if f.At < 0 || f.At > cfg.Duration {
			t.Errorf("fault %s outside the run", f)
		}
		switch f.Kind {
		case Freeze:
			if f.Down <= gatewayTimeout+claimGrace || f.Down < lo || f.Down > hi || f.Down >= noShowHorizon {
				t.Errorf("freeze %s is not past the lease and within the no-show horizon", f)
			}
		case Arm:
			armed[f.Failpoint]++
		case Kill, DBRestart, BackendKill:
		}
	}
	if kinds[DBRestart] < 2 || kinds[BackendKill] < 3 || kinds[Kill] < 30 || kinds[Freeze] < 1 {
		t.Errorf("plan has too few faults: %v", kinds)
	}
	for _, fp := range []string{failpoint.AfterClaim, failpoint.AfterGateway, failpoint.MidBatch} {
		if armed[fp] == 0 {
			t.Errorf("failpoint %s is never armed", fp)
		}
	}
}
