package chaos

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/settlepay/settle/internal/failpoint"
)

// FaultKind names a kind of fault.
type FaultKind string

// The faults the harness injects.
const (
	// Kill sends SIGKILL to one process and starts it again after Down.
	Kill FaultKind = "kill"
	// Arm kills one process (or, for the reconcile failpoint, every
	// reconciler) and starts it again after Down with Failpoint armed; once
	// the failpoint has killed it, it is started again unarmed.
	Arm FaultKind = "arm"
	// Freeze stops a replica with SIGSTOP for Down, then resumes it.
	Freeze FaultKind = "freeze"
	// DBRestart shuts PostgreSQL down in immediate mode (a crash: recovery
	// from the WAL at the next start) and starts it again after Down.
	DBRestart FaultKind = "db-restart"
	// BackendKill terminates a Share of the database's backends, whatever
	// they are doing.
	BackendKill FaultKind = "backend-kill"
)

// AllReconcilers is the Target of an Arm fault that arms every reconciler.
const AllReconcilers = "reconcilers"

// Fault is one entry of the fault schedule.
type Fault struct {
	// At is the fault's offset from the start of the workload.
	At   time.Duration
	Kind FaultKind
	// Target names the process: "serve-1", "reconcile-0" or AllReconcilers.
	Target string
	// Failpoint is what an Arm fault arms.
	Failpoint string
	// Down is how long a process or the database stays down, or how long a
	// replica stays frozen.
	Down time.Duration
	// Share is the fraction of backends a BackendKill terminates.
	Share float64
	// Seed drives the fault's own choices at run time (which backends).
	Seed uint64
}

func (f Fault) String() string {
	at := f.At.Round(time.Millisecond)
	switch f.Kind {
	case Arm:
		return fmt.Sprintf("+%s arm %s with %s after %s", at, f.Target, f.Failpoint, f.Down.Round(time.Millisecond))
	case BackendKill:
		return fmt.Sprintf("+%s backend-kill %.0f%%", at, 100*f.Share)
	case DBRestart:
		return fmt.Sprintf("+%s db-restart, down %s", at, f.Down.Round(time.Millisecond))
	default: // Kill, Freeze
		return fmt.Sprintf("+%s %s %s for %s", at, f.Kind, f.Target, f.Down.Round(time.Millisecond))
	}
}

// Faults are the rates of the faults injected while the workload runs.
type Faults struct {
	// KillsPerMinute: SIGKILLs of a random replica or reconciler.
	KillsPerMinute float64
	// FreezesPerMinute: SIGSTOPs of a random replica, each longer than a
	// claim's lease and shorter than the no-show horizon (see the package
	// documentation).
	FreezesPerMinute float64
	// DBRestartsPerMinute: immediate-mode restarts of PostgreSQL; when not
	// zero, at least two per run.
	DBRestartsPerMinute float64
	// BackendKillsPerMinute: terminations of database backends; when not
	// zero, at least three per run.
	BackendKillsPerMinute float64
	// FailpointRounds is how many times each failpoint is armed. When not
	// zero, a run also checks that each one fired, arming it again at the
	// end of the schedule if it has not.
	FailpointRounds int
}

// DefaultFaults are the fault rates of a run that does not set them.
func DefaultFaults() Faults {
	return Faults{KillsPerMinute: 24, FreezesPerMinute: 4, DBRestartsPerMinute: 1,
		BackendKillsPerMinute: 3, FailpointRounds: 2}
}

// planParams is what the schedule depends on besides the seed.
type planParams struct {
	duration             time.Duration
	replicas             int
	reconcilers          int
	faults               Faults
	freezeMin, freezeMax time.Duration
}

// The schedule leaves the first and last moments of a run alone, so that the
// processes are up before the first fault and the last one ends in time.
const (
	planWarmup = 2 * time.Second
	planTail   = 2 * time.Second
)

// plan draws the fault schedule from the seed alone: the same seed and
// parameters give the same schedule, so a failing seed can be replayed.
func plan(seed uint64, p planParams) []Fault {
	rng := newRand(seed)
	from, to := planWarmup, p.duration-planTail
	if to <= from {
		from, to = 0, p.duration
	}
	window := to - from
	minutes := p.duration.Minutes()
	count := func(perMinute float64, least int) int {
		if perMinute <= 0 {
			return 0
		}
		return max(least, int(math.Round(perMinute*minutes)))
	}
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	replica := func() string { return fmt.Sprintf("serve-%d", rng.IntN(p.replicas)) }
	var out []Fault
	add := func(f Fault) {
		f.Seed = rng.Uint64()
		out = append(out, f)
	}

	for range count(p.faults.KillsPerMinute, 0) {
		n := rng.IntN(p.replicas + p.reconcilers)
		target := fmt.Sprintf("serve-%d", n)
		if n >= p.replicas {
			target = fmt.Sprintf("reconcile-%d", n-p.replicas)
		}
		add(Fault{At: between(from, to), Kind: Kill, Target: target, Down: between(0, time.Second)})
	}
	for range count(p.faults.FreezesPerMinute, 0) {
		add(Fault{At: between(from, to), Kind: Freeze, Target: replica(), Down: between(p.freezeMin, p.freezeMax)})
	}
	// Database restarts are spread out, one per slice of the window, so
	// that each is a separate crash and recovery.
	if n := count(p.faults.DBRestartsPerMinute, 2); n > 0 {
		slice := window / time.Duration(n)
		for i := range n {
			start := from + time.Duration(i)*slice
			add(Fault{At: between(start+slice/5, start+4*slice/5), Kind: DBRestart, Down: between(0, 1500*time.Millisecond)})
		}
	}
	for range count(p.faults.BackendKillsPerMinute, 3) {
		add(Fault{At: between(from, to), Kind: BackendKill, Share: 0.3 + 0.7*rng.Float64()})
	}
	// Failpoints are armed in the first two thirds of the window, so that
	// they have time to fire while the workload runs.
	armTo := from + 2*window/3
	for range p.faults.FailpointRounds {
		for _, fp := range []string{failpoint.AfterClaim, failpoint.AfterGateway} {
			add(Fault{At: between(from, armTo), Kind: Arm, Target: replica(), Failpoint: fp, Down: between(0, 500*time.Millisecond)})
		}
		// A batch must hold two due orders for the reconcile failpoint to
		// fire: every reconciler goes down for a few seconds, so that due
		// orders pile up, and comes back armed.
		add(Fault{At: between(from, armTo), Kind: Arm, Target: AllReconcilers, Failpoint: failpoint.MidBatch,
			Down: between(2*time.Second, 4*time.Second)})
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return cmp.Compare(a.At, b.At) })
	return out
}

// newRand returns a generator determined by seed.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0xc4a05)) }
