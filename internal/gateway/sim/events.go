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
// (see refpsp.Event), for every charge it makes, once the charge is visible
// to lookups: a gateway tells of an outcome it knows.
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

// eventsLocked plans the deliveries of the event for c, drawing the
// duplication, reordering and loss from the simulator's source so that
// they depend only on the seed and the requests.
func (s *Sim) eventsLocked(c Charge, visibleAt time.Time) []delivery {
	ev := s.opts.Events
	if ev.URL == "" {
		return nil
	}
	s.eventSeq++
	e := refpsp.Event{ID: fmt.Sprintf("evt_sim_%06d", s.eventSeq), Type: refpsp.EventSucceeded, Created: visibleAt.Unix()}
	if c.Status == StatusDeclined {
		e.Type = refpsp.EventDeclined
	}
	e.Data.Object = wireCharge(c)
	body, err := json.Marshal(e)
	if err != nil {
		panic(err) // the simulator's own types always marshal
	}
	// The events draw from a source of their own, so that the faults of
	// the charges are the same with events or without.
	if s.eventRng.Float64() < ev.Loss {
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
