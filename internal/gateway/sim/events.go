package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
)

// Events configures the events the simulator pushes, in refpsp's format
// (see refpsp.Event), for every charge, capture and void it makes, once it
// is visible to lookups (a gateway tells of an outcome it knows), and for
// every authorization that lapses.
type Events struct {
	// URL receives the events (POST); empty sends none.
	URL string
	// More are further receivers, as a load balancer's backends: event n
	// goes first to receiver n (of URL and More, in turn), and each retry
	// to the next.
	More []string
	// Secrets sign each event (one v1 per secret: two while one rotates).
	Secrets []string
	// Delay is added before each event is sent.
	Delay time.Duration
	// Reorder adds a random delay up to it to each send, so that events
	// (and an event and its duplicate) arrive in any order.
	Reorder time.Duration
	// Duplicate is the probability that an event is delivered twice.
	Duplicate float64
	// Loss is the probability that an event is never delivered.
	Loss float64
	// Attempts bounds the deliveries of one event that get no 2xx, as a
	// gateway's retries do. Zero means 5.
	Attempts int
}

// delivery is one event to send, when, and the receiver it goes to first.
type delivery struct {
	body  []byte
	at    time.Time
	first int
}

// chargeEvent is the event that tells of c's outcome, made at now.
func chargeEvent(c Charge, now time.Time) refpsp.Event {
	e := refpsp.Event{Type: refpsp.EventSucceeded, Created: now.Unix()}
	switch c.Status {
	case StatusDeclined:
		e.Type = refpsp.EventDeclined
	case StatusAuthorized:
		e.Type = refpsp.EventAuthorized
	}
	e.Data.Object = wireCharge(c)
	return e
}

// sendLocked sends e (numbered here) once visibleAt has come, as the
// events' faults allow.
func (s *Sim) sendLocked(e refpsp.Event, visibleAt time.Time) {
	s.startLocked(s.plannedLocked(e, visibleAt, true))
}

// startLocked starts the deliveries ds, each in its own goroutine that
// the simulator waits for when it stops.
func (s *Sim) startLocked(ds []delivery) {
	for _, d := range ds {
		s.senders.Add(1)
		go s.deliver(d)
	}
}

// plannedLocked plans the deliveries of e, drawing the duplication,
// reordering and (when lossy) loss from the simulator's source so that
// they depend only on the seed and the requests.
func (s *Sim) plannedLocked(e refpsp.Event, visibleAt time.Time, lossy bool) []delivery {
	ev := s.opts.Events
	if ev.URL == "" {
		return nil
	}
	s.eventSeq++
	e.ID = fmt.Sprintf("evt_sim_%06d", s.eventSeq)
	if e.Created == 0 || visibleAt.Unix() > e.Created {
		e.Created = visibleAt.Unix()
	}
	body, err := json.Marshal(e)
	if err != nil {
		panic(err) // the simulator's own types always marshal
	}
	// The events draw from a source of their own, so that the faults of
	// the charges are the same with events or without.
	if lossy && s.eventRng.Float64() < ev.Loss {
		return nil
	}
	n := 1
	if s.eventRng.Float64() < ev.Duplicate {
		n = 2
	}
	out := make([]delivery, n)
	for i := range out {
		at := visibleAt.Add(ev.Delay)
		if ev.Reorder > 0 {
			at = at.Add(time.Duration(s.eventRng.Int64N(int64(ev.Reorder) + 1)))
		}
		out[i] = delivery{body: body, at: at, first: s.eventSeq + i}
	}
	return out
}

// deliver sends d when it is due, retrying (as gateways do) until a 2xx or
// the attempts run out, or the simulator stops.
func (s *Sim) deliver(d delivery) {
	defer s.senders.Done()
	attempts := s.opts.Events.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	// A delivery in progress is cut short when the simulator stops.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := time.Until(d.at)
	for i := 0; i < attempts; i++ {
		select {
		case <-s.stopping:
			return
		case <-time.After(wait):
		}
		urls := append([]string{s.opts.Events.URL}, s.opts.Events.More...)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, urls[(d.first+i)%len(urls)], bytes.NewReader(d.body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(refpsp.SignatureHeader, refpsp.Sign(d.body, time.Now(), s.opts.Events.Secrets...))
		resp, err := s.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return
			}
		}
		wait = time.Duration(1<<i) * 200 * time.Millisecond
	}
}
