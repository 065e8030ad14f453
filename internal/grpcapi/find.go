package grpcapi

import (
	"context"
	"errors"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// FindOrders finds the orders an operator's search names, within the
// key's scope: the order of that id, and the order of that merchant
// reference. An ops key of every merchant looks references up in
// merchant_id's orders, or the default merchant's when it names none. What
// is not found, or is another merchant's, is left out: a search learns
// nothing of another merchant.
func (s *opsServer) FindOrders(ctx context.Context, req *settlev1.FindOrdersRequest) (*settlev1.FindOrdersResponse, error) {
	// An id is text a reference may be too: the query is held to a
	// reference's rules, which refuse card numbers.
	q := req.GetQuery()
	if err := order.CheckReference("query", q); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
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
	resp := &settlev1.FindOrdersResponse{}
	seen := map[string]bool{}
	add := func(o order.Order, err error) error {
		switch {
		case errors.Is(err, order.ErrNotFound):
			return nil
		case err != nil:
			return err
		case !seen[o.ID]:
			seen[o.ID] = true
			resp.Orders = append(resp.Orders, orderToProto(o))
		}
		return nil
	}
	if err := order.CheckID("query", canonicalID(q)); err == nil {
		if err := add(s.svc.Get(ctx, scope, canonicalID(q))); err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
	}
	if err := add(s.svc.GetByReference(ctx, refMerchant, q)); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return resp, nil
}
