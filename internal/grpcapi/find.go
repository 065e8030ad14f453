package grpcapi

import (
	"context"
	"errors"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// FindOrders finds the orders an operator's search names, within the
// key's scope: the order of that id (any merchant's, for an ops key of
// every merchant), and the orders of the reference merchant (merchant_id,
// the key's own, or the default merchant's for a key of every merchant
// that names none) that the query names by merchant reference or by the
// id, request key or gateway id of an attempt, refund, capture, void or
// dispute (order.Service.Find). What is not found, or is another
// merchant's, is left out: a search learns nothing of another merchant.
func (s *opsServer) FindOrders(ctx context.Context, req *settlev1.FindOrdersRequest) (*settlev1.FindOrdersResponse, error) {
	q := req.GetQuery()
	scope := opsScope(ctx)
	refMerchant := scope.MerchantID()
	if m := req.GetMerchantId(); m != "" {
		if err := order.CheckMerchantID("merchant_id", m); err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		if !scope.IsAnyMerchant() && m != refMerchant {
			return &settlev1.FindOrdersResponse{}, nil
		}
		refMerchant = m
	} else if scope.IsAnyMerchant() {
		refMerchant = order.DefaultMerchant
	}
	// Find holds the query to a reference's rules (which refuse card
	// numbers) before anything is read, the order-id lookup included.
	found, err := s.svc.Find(ctx, refMerchant, q)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	if id := canonicalID(q); order.CheckID("query", id) == nil {
		o, err := s.svc.Get(ctx, scope, id)
		switch {
		case err == nil:
			found = append([]order.Order{o}, found...)
		case !errors.Is(err, order.ErrNotFound):
			return nil, toStatus(ctx, s.log, err)
		}
	}
	resp := &settlev1.FindOrdersResponse{}
	seen := map[string]bool{}
	for _, o := range found {
		if !seen[o.ID] {
			seen[o.ID] = true
			resp.Orders = append(resp.Orders, orderToProto(o))
		}
	}
	return resp, nil
}
