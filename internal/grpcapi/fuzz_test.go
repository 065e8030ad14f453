package grpcapi

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// FuzzRequestConversion feeds arbitrary wire bytes to the proto → domain
// conversion and the domain's validation: nothing panics, and whatever
// passes is within the limits the rest of Settle assumes.
func FuzzRequestConversion(f *testing.F) {
	seed := func(m proto.Message) {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	seed(&settlev1.CreateOrderRequest{MerchantReference: "order-1", Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_ok"})
	seed(&settlev1.CreateOrderRequest{MerchantReference: "4242424242424242", Amount: &settlev1.Money{Currency: "gbp", AmountMinor: -1}})
	seed(&settlev1.ChargeOrderRequest{OrderId: order.NewID(), RequestId: "checkout-1", PaymentMethod: "tok_ok"})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var create settlev1.CreateOrderRequest
		if proto.Unmarshal(b, &create) == nil {
			n, err := newOrderFromProto(&create)
			if err == nil {
				err = n.Validate()
			}
			if err == nil {
				if n.Amount.AmountMinor <= 0 || n.Amount.AmountMinor > order.MaxAmountMinor || len(n.MerchantReference) > order.MaxReferenceLen ||
					order.ContainsCardNumber(n.PaymentMethod) || order.ContainsCardNumber(n.MerchantReference) {
					t.Fatalf("accepted %+v", n)
				}
			} else if v := (*order.ValidationError)(nil); !errors.As(err, &v) || v.Field == "" {
				t.Fatalf("error %v names no field", err)
			}
		}
		var charge settlev1.ChargeOrderRequest
		if proto.Unmarshal(b, &charge) == nil {
			c := chargeInputFromProto(&charge)
			if err := c.Validate(); err == nil && (utf8.RuneCountInString(c.RequestID) < order.MinRequestIDLen || strings.TrimSpace(c.RequestID) == "" || strings.ContainsAny(c.RequestID, "\x00\n")) {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}
