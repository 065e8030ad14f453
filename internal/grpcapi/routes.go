package grpcapi

import (
	"context"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// routesMerchant checks a routes call's merchant_id against the ops key:
// a key of one merchant reaches only its own rules.
func routesMerchant(ctx context.Context, m string) error {
	if err := order.CheckMerchantID("merchant_id", m); err != nil {
		return err
	}
	if sc := opsScope(ctx); !sc.IsAnyMerchant() && sc.MerchantID() != m {
		return &order.ValidationError{Field: "merchant_id", Reason: "is not the merchant of this API key"}
	}
	return nil
}

func (s *opsServer) GetRoutes(ctx context.Context, req *settlev1.GetRoutesRequest) (*settlev1.GetRoutesResponse, error) {
	if err := routesMerchant(ctx, req.GetMerchantId()); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	c, err := s.svc.Routes(ctx, req.GetMerchantId())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &settlev1.GetRoutesResponse{Routes: routeRulesToProto(c)}
	for _, a := range s.svc.GatewayAccounts() {
		resp.Accounts = append(resp.Accounts, &settlev1.GatewayAccount{Name: a.Name, Kind: a.Kind,
			CredentialFingerprint: a.Fingerprint, ManualCapture: a.ManualCapture, Refunds: a.Refunds,
			ThreeDSecure: a.ThreeDS, Disputes: a.Disputes})
	}
	return resp, nil
}

func (s *opsServer) SetRoutes(ctx context.Context, req *settlev1.SetRoutesRequest) (*settlev1.SetRoutesResponse, error) {
	if err := routesMerchant(ctx, req.GetMerchantId()); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	rules, err := RouteRulesFromProto(req.GetRules())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	c, err := s.svc.SetRoutes(ctx, req.GetMerchantId(), req.GetExpectedVersion(), rules, string(operator(ctx)), req.GetNote())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	s.log.InfoContext(ctx, "route rules changed", "merchant_id", c.MerchantID, "version", c.Version, "rules", len(c.Rules),
		"actor", c.Actor)
	return &settlev1.SetRoutesResponse{Routes: routeRulesToProto(c)}, nil
}

// RouteRulesFromProto is route rules as the domain takes them (the
// domain validates them): SetRoutes' and the routes file's.
func RouteRulesFromProto(in []*settlev1.RouteRule) ([]order.RouteRule, error) {
	rules := make([]order.RouteRule, len(in))
	for i, r := range in {
		capture := order.CaptureMode("")
		if m := r.GetCaptureMode(); m != settlev1.CaptureMode_CAPTURE_MODE_UNSPECIFIED {
			var err error
			if capture, err = captureModeFromProto(m); err != nil {
				return nil, err
			}
		}
		rules[i] = order.RouteRule{Name: r.GetName(), Currencies: r.GetCurrencies(), MinAmount: r.GetMinAmountMinor(),
			MaxAmount: r.GetMaxAmountMinor(), Capture: capture, Gateways: r.GetGateways()}
		for _, w := range r.GetSplit() {
			rules[i].Split = append(rules[i].Split, order.WeightedGateway{Gateway: w.GetGateway(), Weight: int(w.GetWeight())})
		}
	}
	return rules, nil
}

// routeRulesToProto is a version of route rules as the API shows it.
func routeRulesToProto(c order.RouteConfig) *settlev1.RouteRules {
	out := &settlev1.RouteRules{MerchantId: c.MerchantID, Version: c.Version, Actor: c.Actor, Note: c.Note}
	if !c.CreatedAt.IsZero() {
		out.CreateTime = timestamp(c.CreatedAt)
	}
	for _, r := range c.Rules {
		p := &settlev1.RouteRule{Name: r.Name, Currencies: r.Currencies, MinAmountMinor: r.MinAmount,
			MaxAmountMinor: r.MaxAmount, CaptureMode: captureModeToProto[r.Capture], Gateways: r.Gateways}
		for _, w := range r.Split {
			p.Split = append(p.Split, &settlev1.WeightedGateway{Gateway: w.Gateway, Weight: int32(w.Weight)})
		}
		out.Rules = append(out.Rules, p)
	}
	return out
}
