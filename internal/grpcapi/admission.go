package grpcapi

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

// Admission control bounds the work the server takes on, whoever asks:
// past its capacity a call is refused at once, RESOURCE_EXHAUSTED, before
// it reads or writes anything, rather than waiting for a database
// connection with every other call and timing out after its order was
// claimed and its gateway called. The per-key limits (Limits) keep one
// merchant from taking every place; admission keeps all of them together
// within what the server can finish in time.

// AdmissionLimits bound the calls of the admitted class (see admitted):
// at most MaxInFlight run at once, and at most MaxQueue wait for a place,
// first come first served. A call waits only while its deadline leaves
// time for the expected wait and its own expected duration (moving
// averages of the recent calls'), and a call without a deadline at most
// MaxWait. MaxInFlight zero turns admission control off.
type AdmissionLimits struct {
	MaxInFlight int
	MaxQueue    int
	MaxWait     time.Duration
}

// DefaultAdmissionMaxWait bounds the wait of a call without a deadline
// when AdmissionLimits.MaxWait is zero.
const DefaultAdmissionMaxWait = time.Second

// Reasons of a refusal, as the metrics count them.
const (
	// RefusedQueueFull: every place is taken and the queue is full.
	RefusedQueueFull = "queue_full"
	// RefusedDeadline: on arrival, the call's deadline leaves less than
	// the expected wait and its expected duration.
	RefusedDeadline = "deadline"
	// RefusedWaited: the call waited in the queue until its deadline (or
	// MaxWait) left no time for the work.
	RefusedWaited = "waited"
)

// minPushback is the least retry delay a refusal suggests: retrying
// sooner only spends the server's time on refusals. maxPushback is the
// most.
const (
	minPushback = 20 * time.Millisecond
	maxPushback = 10 * time.Second
)

// ewmaWeight is the weight of the newest call in the moving averages of
// the calls' durations: about the last ten calls count.
const ewmaWeight = 0.2

// admitted is the class of calls under admission control: OrderService's
// calls that write, and so may claim an order or call a gateway. Reads
// (GetOrder, ListEvents, WatchOrder) hold a database connection for one
// statement and are bounded by the per-key limits; OpsService stays open
// to operators during an overload, when they need it most; health checks
// and reflection touch no database.
var admitted = map[string]bool{
	settlev1.OrderService_CreateOrder_FullMethodName:          true,
	settlev1.OrderService_ChargeOrder_FullMethodName:          true,
	settlev1.OrderService_CreateAndChargeOrder_FullMethodName: true,
	settlev1.OrderService_CancelOrder_FullMethodName:          true,
	settlev1.OrderService_RefundOrder_FullMethodName:          true,
	settlev1.OrderService_CaptureOrder_FullMethodName:         true,
	settlev1.OrderService_VoidOrder_FullMethodName:            true,
}

// admissionObserver is told of each admission and refusal (the metrics).
type admissionObserver struct {
	admitted func(method string, waited time.Duration)
	refused  func(method, reason string)
}

// admission applies AdmissionLimits.
type admission struct {
	limits  AdmissionLimits
	observe admissionObserver
	now     func() time.Time

	mu      sync.Mutex
	running int
	queue   []*admissionWaiter // first come, first served
	// took is the moving average of every admitted call's duration, and
	// byMethod each method's: the first says how fast places free up, the
	// second how long a call of the method will hold one.
	took     movingAverage
	byMethod map[string]*movingAverage
	// retryAt is the latest retry time a refusal has suggested: each
	// refused call is given its own later time, places' worth of calls
	// apart, so that the refused come back as places free up rather than
	// all at once to be refused again.
	retryAt time.Time
}

// admissionWaiter is a call waiting in the queue. ready is closed when a
// place is handed to it (granted, under the admission's lock).
type admissionWaiter struct {
	ready   chan struct{}
	granted bool
}

func newAdmission(limits AdmissionLimits, observe admissionObserver, now func() time.Time) *admission {
	if limits.MaxWait <= 0 {
		limits.MaxWait = DefaultAdmissionMaxWait
	}
	if observe.admitted == nil {
		observe.admitted = func(string, time.Duration) {}
	}
	if observe.refused == nil {
		observe.refused = func(string, string) {}
	}
	a := &admission{limits: limits, observe: observe, now: now, byMethod: map[string]*movingAverage{}}
	for m := range admitted {
		a.byMethod[m] = &movingAverage{}
	}
	return a
}

// movingAverage is an exponentially weighted moving average of durations;
// zero until the first observation.
type movingAverage struct {
	v    float64
	seen bool
}

func (m *movingAverage) add(d time.Duration) {
	if !m.seen {
		m.v, m.seen = float64(d), true
		return
	}
	m.v += ewmaWeight * (float64(d) - m.v)
}

func (m *movingAverage) get() time.Duration { return time.Duration(m.v) }

// refusal is why a call was refused, and when to retry.
type refusal struct {
	reason   string
	pushback time.Duration
	// running and queued are the counts when it was refused; need is the
	// time the call would have needed (deadline refusals).
	running, queued int
	need            time.Duration
}

// decision is what to do with an arriving call: run it (the place is
// taken), wait in the queue (w), or refuse it (r).
type decision struct {
	w *admissionWaiter
	r *refusal
}

// expectedWaitLocked is how long the call that would be at place n of
// the queue (0: its head) may expect to wait for a place: places free up
// at MaxInFlight per average duration.
func (a *admission) expectedWaitLocked(n int) time.Duration {
	return time.Duration(int64(n+1) * int64(a.took.get()) / int64(a.limits.MaxInFlight))
}

// pushbackLocked is the retry delay a refusal at now suggests: the time
// the queue, as it stands, takes to drain, or, when calls refused before
// were told to come back later than that, the time a place frees up after
// theirs.
func (a *admission) pushbackLocked(now time.Time) time.Duration {
	at := now.Add(max(minPushback, a.expectedWaitLocked(len(a.queue))))
	if next := a.retryAt.Add(a.expectedWaitLocked(0)); next.After(at) {
		at = next
	}
	if limit := now.Add(maxPushback); at.After(limit) {
		at = limit
	}
	a.retryAt = at
	return at.Sub(now)
}

// decide admits, queues or refuses a call of method arriving now, whose
// deadline is left (ok false: none).
func (a *admission) decide(method string, now time.Time, left time.Duration, ok bool) decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	own := a.byMethod[method].get()
	refuse := func(reason string, need time.Duration) decision {
		return decision{r: &refusal{reason: reason, pushback: a.pushbackLocked(now), running: a.running, queued: len(a.queue), need: need}}
	}
	if a.running < a.limits.MaxInFlight && len(a.queue) == 0 {
		if ok && left < own {
			return refuse(RefusedDeadline, own)
		}
		a.running++
		return decision{}
	}
	if len(a.queue) >= a.limits.MaxQueue {
		return refuse(RefusedQueueFull, 0)
	}
	if need := a.expectedWaitLocked(len(a.queue)) + own; ok && left < need {
		return refuse(RefusedDeadline, need)
	}
	w := &admissionWaiter{ready: make(chan struct{})}
	a.queue = append(a.queue, w)
	return decision{w: w}
}

// leave takes w out of the queue, unless a place was handed to it first:
// then it reports true, and the call runs.
func (a *admission) leave(w *admissionWaiter) (granted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.granted {
		return true
	}
	for i, q := range a.queue {
		if q == w {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			break
		}
	}
	return false
}

// done gives back the place of a call of method that ran for took,
// handing it to the head of the queue; ran false says the call did not
// run (its caller left as the place came), and took is not averaged.
func (a *admission) done(method string, took time.Duration, ran bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ran {
		a.took.add(took)
		a.byMethod[method].add(took)
	}
	a.running--
	if len(a.queue) > 0 && a.running < a.limits.MaxInFlight {
		w := a.queue[0]
		a.queue[0] = nil
		a.queue = a.queue[1:]
		w.granted = true
		a.running++
		close(w.ready)
	}
}

// maxQueueWait is how long a queued call of method may wait: until its
// deadline leaves only its expected duration, or MaxWait without one.
func (a *admission) maxQueueWait(method string, left time.Duration, ok bool) time.Duration {
	if !ok {
		return a.limits.MaxWait
	}
	a.mu.Lock()
	own := a.byMethod[method].get()
	a.mu.Unlock()
	return left - own
}

// admit takes a place for a call of method, waiting in the queue when
// there is room and time, and returns the function that gives it back.
// Its error is a RESOURCE_EXHAUSTED status to answer at once, or the
// context's error when the caller went away while it waited.
func (a *admission) admit(ctx context.Context, method string) (func(), error) {
	start := a.now()
	left, ok := time.Duration(0), false
	if d, has := ctx.Deadline(); has {
		left, ok = d.Sub(start), true
	}
	dec := a.decide(method, start, left, ok)
	if dec.r != nil {
		a.observe.refused(method, dec.r.reason)
		return nil, dec.r.status(ctx, 0)
	}
	if dec.w != nil {
		t := time.NewTimer(a.maxQueueWait(method, left, ok))
		defer t.Stop()
		select {
		case <-dec.w.ready:
		case <-t.C:
			if !a.leave(dec.w) {
				a.mu.Lock()
				r := &refusal{reason: RefusedWaited, pushback: a.pushbackLocked(a.now()), running: a.running, queued: len(a.queue)}
				a.mu.Unlock()
				a.observe.refused(method, r.reason)
				return nil, r.status(ctx, a.now().Sub(start))
			}
		case <-ctx.Done():
			if a.leave(dec.w) {
				a.done(method, 0, false)
			}
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	admittedAt := a.now()
	a.observe.admitted(method, admittedAt.Sub(start))
	return func() { a.done(method, a.now().Sub(admittedAt), true) }, nil
}

// status is the refusal as a RESOURCE_EXHAUSTED status, with a retry hint
// both as google.rpc.RetryInfo and as the grpc-retry-pushback-ms trailer
// that gRPC's retry policy honours. waited is how long the call queued.
func (r *refusal) status(ctx context.Context, waited time.Duration) error {
	var msg string
	switch r.reason {
	case RefusedQueueFull:
		msg = fmt.Sprintf("the server is at capacity (%d calls running, %d waiting); nothing was done: retry the same request after %dms",
			r.running, r.queued, r.pushback.Milliseconds())
	case RefusedDeadline:
		msg = fmt.Sprintf("the call's deadline leaves less than the %dms it would take to wait for a place and run (%d calls running, %d waiting); nothing was done: retry the same request after %dms, or with a longer deadline",
			r.need.Milliseconds(), r.running, r.queued, r.pushback.Milliseconds())
	default:
		msg = fmt.Sprintf("the call waited %dms for a place and its deadline no longer leaves time to run it; nothing was done: retry the same request after %dms",
			waited.Milliseconds(), r.pushback.Milliseconds())
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", strconv.FormatInt(r.pushback.Milliseconds(), 10)))
	st := status.New(codes.ResourceExhausted, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.pushback)}); err == nil {
		st = d
	}
	return st.Err()
}

// unary is the interceptor: calls of the admitted class run only once
// admitted; the rest go through.
func (a *admission) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !admitted[info.FullMethod] {
		return handler(ctx, req)
	}
	release, err := a.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	defer release()
	return handler(ctx, req)
}
