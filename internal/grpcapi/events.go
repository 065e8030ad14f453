package grpcapi

import (
	"context"
	"encoding/base64"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// EventStore reads a merchant's events and delivers one again.
type EventStore interface {
	ListEvents(ctx context.Context, merchant string, after order.EventCursor, limit int) ([]order.Notification, error)
	ResendEvent(ctx context.Context, merchant string, num int64) error
	// OrderEventDeliveries returns an order's events out and where each
	// one's delivery stands.
	OrderEventDeliveries(ctx context.Context, merchant, orderID string) ([]order.EventDelivery, error)
}

// Event pages: a larger page size is taken as the maximum.
const (
	defaultEventPage = 100
	maxEventPage     = 1000
)

func (s *orderServer) ListEvents(ctx context.Context, req *settlev1.ListEventsRequest) (*settlev1.ListEventsResponse, error) {
	limit := int(req.GetPageSize())
	switch {
	case limit < 0:
		return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "page_size", Reason: "must not be negative"})
	case limit == 0:
		limit = defaultEventPage
	case limit > maxEventPage:
		limit = maxEventPage
	}
	after, ok := decodeCursor(req.GetAfterCursor())
	if !ok {
		return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "after_cursor", Reason: "is not a cursor from a previous response"})
	}
	evs, err := s.events.ListEvents(ctx, merchant(ctx), after, limit)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &settlev1.ListEventsResponse{NextCursor: req.GetAfterCursor()}
	for _, e := range evs {
		ev := &settlev1.Event{Id: e.ID(), Type: e.Type, OrderId: e.Order.ID,
			Sequence: e.Sequence, CreateTime: timestamppb.New(e.CreatedAt), PayloadJson: string(e.Payload())}
		if f := e.Finding; f != nil {
			// An audit finding's event: the order it names, if any.
			ev.OrderId, ev.AuditFindingId = f.OrderID, f.ID
		}
		resp.Events = append(resp.Events, ev)
		resp.NextCursor = encodeCursor(e.Cursor)
	}
	return resp, nil
}

func (s *opsServer) ResendEvent(ctx context.Context, req *settlev1.ResendEventRequest) (*settlev1.ResendEventResponse, error) {
	if err := order.CheckMerchantID("merchant_id", req.GetMerchantId()); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	num, err := order.ParseEventID(req.GetEventId())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	// Another merchant's event is NOT_FOUND to a scoped ops key, as an
	// event that does not exist is: the key learns nothing of it.
	if sc := opsScope(ctx); !sc.IsAnyMerchant() && sc.MerchantID() != req.GetMerchantId() {
		return nil, toStatus(ctx, s.log, order.ErrEventNotFound)
	}
	if err := s.events.ResendEvent(ctx, req.GetMerchantId(), num); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.ResendEventResponse{}, nil
}

// A cursor is the position (transaction, event number) of the last event
// a client has, opaque to it.
func encodeCursor(c order.EventCursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%d", c.TxID, c.Num))
}

func decodeCursor(s string) (order.EventCursor, bool) {
	var c order.EventCursor
	if s == "" {
		return c, true
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, false
	}
	var rest string
	if n, _ := fmt.Sscanf(string(b), "%d.%d%s", &c.TxID, &c.Num, &rest); n != 2 || c.Num <= 0 {
		return order.EventCursor{}, false
	}
	return c, true
}

func (s *opsServer) ListOrderEvents(ctx context.Context, req *settlev1.ListOrderEventsRequest) (*settlev1.ListOrderEventsResponse, error) {
	o, err := s.svc.Get(ctx, opsScope(ctx), canonicalID(req.GetOrderId()))
	if err != nil {
		return nil, toStatus(ctx, s.log, fieldName(err, "order_id"))
	}
	ds, err := s.events.OrderEventDeliveries(ctx, o.MerchantID, o.ID)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &settlev1.ListOrderEventsResponse{}
	for _, d := range ds {
		e := &settlev1.OrderEventDelivery{EventId: order.EventID(d.Num), Type: d.Type, CreateTime: timestamp(d.CreatedAt),
			Attempts: int32(d.Attempts), LastStatus: int32(d.LastStatus)}
		if !d.DeliveredAt.IsZero() {
			e.DeliveredTime = timestamp(d.DeliveredAt)
		}
		if !d.FailedAt.IsZero() {
			e.FailedTime = timestamp(d.FailedAt)
		}
		if !d.NextTry.IsZero() && d.DeliveredAt.IsZero() && d.FailedAt.IsZero() {
			e.NextTryTime = timestamp(d.NextTry)
		}
		for _, t := range d.FailedTries {
			e.FailedTries = append(e.FailedTries, &settlev1.DeliveryTry{TryTime: timestamp(t.At), Attempt: int32(t.Attempt),
				Status: int32(t.Status), Error: t.Error})
		}
		resp.Events = append(resp.Events, e)
	}
	return resp, nil
}
