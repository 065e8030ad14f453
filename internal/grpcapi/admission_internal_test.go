package grpcapi

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

var (
	chargeMethod = settlev1.OrderService_ChargeOrder_FullMethodName
	createMethod = settlev1.OrderService_CreateOrder_FullMethodName
)

// TestAdmissionDecisions walks the limiter's decisions: places first,
// then the queue, then refusals; a deadline that cannot cover the expected
// wait and duration is refused on arrival; a freed place goes to the head
// of the queue.
func TestAdmissionDecisions(t *testing.T) {
	t.Parallel()
	a := newAdmission(AdmissionLimits{MaxInFlight: 2, MaxQueue: 2}, admissionObserver{}, time.Now)
	now := time.Now()

	// Nothing known yet: any deadline will do while places are free.
	for i := range 2 {
		if d := a.decide(chargeMethod, now, time.Millisecond, true); d.w != nil || d.r != nil {
			t.Fatalf("call %d: want a place at once, got %+v", i, d)
		}
	}
	// Calls of 100ms: places free up every 50ms, and a charge holds one
	// for 100ms.
	for range 2 {
		a.done(chargeMethod, 100*time.Millisecond, true)
	}
	for range 2 {
		if d := a.decide(chargeMethod, now, time.Second, true); d.w != nil || d.r != nil {
			t.Fatalf("want a place at once, got %+v", d)
		}
	}
	// Full: the head of the queue waits 50ms and runs 100ms.
	if d := a.decide(chargeMethod, now, 149*time.Millisecond, true); d.r == nil || d.r.reason != RefusedDeadline || d.r.need != 150*time.Millisecond {
		t.Fatalf("deadline 149ms at the head of the queue: want refused for its deadline, needing 150ms, got %+v", d.r)
	}
	first := a.decide(chargeMethod, now, 150*time.Millisecond, true)
	if first.w == nil {
		t.Fatalf("deadline 150ms: want queued, got %+v", first.r)
	}
	// Second in the queue: 100ms of waiting and 100ms of work.
	if d := a.decide(chargeMethod, now, 199*time.Millisecond, true); d.r == nil || d.r.reason != RefusedDeadline {
		t.Fatalf("deadline 199ms second in the queue: want refused for its deadline, got %+v", d.r)
	}
	// A call without a deadline waits (up to MaxWait).
	second := a.decide(chargeMethod, now, 0, false)
	if second.w == nil {
		t.Fatalf("no deadline: want queued, got %+v", second.r)
	}
	d := a.decide(chargeMethod, now, time.Hour, true)
	if d.r == nil || d.r.reason != RefusedQueueFull {
		t.Fatalf("queue full: want refused queue_full, got %+v", d)
	}
	if d.r.pushback != 150*time.Millisecond {
		t.Errorf("pushback: got %s, want the queue's drain time, 150ms", d.r.pushback)
	}
	// The next refused are told to come back a place's time (50ms) after
	// the one before them, not all at once; once those times have passed,
	// the queue's drain time again.
	for i, want := range []time.Duration{200 * time.Millisecond, 250 * time.Millisecond} {
		if d := a.decide(chargeMethod, now, time.Hour, true); d.r == nil || d.r.pushback != want {
			t.Errorf("refusal %d after the first: %+v, want pushback %s", i+1, d.r, want)
		}
	}
	if d := a.decide(chargeMethod, now.Add(time.Second), time.Hour, true); d.r == nil || d.r.pushback != 150*time.Millisecond {
		t.Errorf("refusal once the suggested times passed: %+v, want pushback 150ms", d.r)
	}
	// A freed place goes to the first in the queue, and only to it.
	a.done(chargeMethod, 100*time.Millisecond, true)
	select {
	case <-first.w.ready:
	default:
		t.Fatal("the head of the queue was not handed the freed place")
	}
	select {
	case <-second.w.ready:
		t.Fatal("the second in the queue was handed a place")
	default:
	}
	if !a.leave(first.w) {
		t.Error("leave after the place was handed: want granted")
	}
	if a.leave(second.w) {
		t.Error("leave before a place was handed: want not granted")
	}
	if a.running != 2 || len(a.queue) != 0 {
		t.Errorf("running %d, queued %d; want 2, 0", a.running, len(a.queue))
	}
}

// TestAdmissionDeadlineOnIdleServer: a call whose deadline is shorter than
// its method's recent duration is refused even with places free, and
// another method's duration is its own.
func TestAdmissionDeadlineOnIdleServer(t *testing.T) {
	t.Parallel()
	a := newAdmission(AdmissionLimits{MaxInFlight: 4, MaxQueue: 4}, admissionObserver{}, time.Now)
	now := time.Now()
	a.running++
	a.done(chargeMethod, 200*time.Millisecond, true)
	if d := a.decide(chargeMethod, now, 100*time.Millisecond, true); d.r == nil || d.r.reason != RefusedDeadline {
		t.Fatalf("charge with 100ms left after 200ms charges: want refused, got %+v", d)
	}
	if d := a.decide(createMethod, now, 100*time.Millisecond, true); d.r != nil || d.w != nil {
		t.Fatalf("create with 100ms left: want a place at once, got %+v", d)
	}
}

// TestAdmissionAverages: the moving average follows the recent calls.
func TestAdmissionAverages(t *testing.T) {
	t.Parallel()
	var m movingAverage
	m.add(100 * time.Millisecond)
	if m.get() != 100*time.Millisecond {
		t.Fatalf("first: %s", m.get())
	}
	for range 30 {
		m.add(10 * time.Millisecond)
	}
	if got := m.get(); got < 10*time.Millisecond || got > 11*time.Millisecond {
		t.Fatalf("after 30 calls of 10ms: %s, want about 10ms", got)
	}
}

// TestAdmissionWaitAndRefusal: a queued call that gets no place within
// its time is refused RESOURCE_EXHAUSTED with a retry hint, and counted;
// one whose caller leaves is gone from the queue; one that gets a place
// runs, and its wait is observed.
func TestAdmissionWaitAndRefusal(t *testing.T) {
	t.Parallel()
	var refused []string
	var waits []time.Duration
	a := newAdmission(AdmissionLimits{MaxInFlight: 1, MaxQueue: 1, MaxWait: 50 * time.Millisecond}, admissionObserver{
		admitted: func(_ string, w time.Duration) { waits = append(waits, w) },
		refused:  func(_, reason string) { refused = append(refused, reason) },
	}, time.Now)
	release, err := a.admit(context.Background(), chargeMethod)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = a.admit(context.Background(), chargeMethod)
	if took := time.Since(start); took < 50*time.Millisecond || took > time.Second {
		t.Errorf("a call without a deadline waited %s, want MaxWait (50ms)", took)
	}
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("after MaxWait: %v, want RESOURCE_EXHAUSTED", err)
	}
	var hinted bool
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() >= minPushback {
			hinted = true
		}
	}
	if !hinted {
		t.Errorf("refusal %v has no RetryInfo of at least %s", st.Message(), minPushback)
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := a.admit(ctx, chargeMethod); errc <- err }()
	for {
		a.mu.Lock()
		n := len(a.queue)
		a.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("caller left while queued: %v, want CANCELED", err)
	}
	if len(a.queue) != 0 {
		t.Fatalf("the queue holds %d after its caller left", len(a.queue))
	}

	got := make(chan func(), 1)
	go func() {
		r, err := a.admit(context.Background(), chargeMethod)
		if err != nil {
			t.Error(err)
			r = func() {}
		}
		got <- r
	}()
	time.Sleep(10 * time.Millisecond)
	release()
	(<-got)()
	if want := []string{RefusedWaited}; !slices.Equal(refused, want) {
		t.Errorf("refusals counted %v, want %v", refused, want)
	}
	if len(waits) != 2 || waits[1] < 5*time.Millisecond {
		t.Errorf("waits observed %v, want two, the second of about 10ms", waits)
	}
	if a.running != 0 {
		t.Errorf("running %d after every call finished", a.running)
	}
}

// TestAdmissionQueueFollowsTheDeadline: a queued call with a deadline
// waits as long as its deadline leaves time for its work, past MaxWait
// (which bounds calls without one).
func TestAdmissionQueueFollowsTheDeadline(t *testing.T) {
	t.Parallel()
	a := newAdmission(AdmissionLimits{MaxInFlight: 1, MaxQueue: 1, MaxWait: 10 * time.Millisecond}, admissionObserver{}, time.Now)
	release, err := a.admit(context.Background(), chargeMethod)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	next, err := a.admit(ctx, chargeMethod)
	if err != nil {
		t.Fatalf("queued with a 5s deadline: %v after %s, want admitted once the place is free", err, time.Since(start))
	}
	next()
}
