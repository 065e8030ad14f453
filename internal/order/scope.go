package order

// Scope is whose orders a read or a change may reach: one merchant's (a
// checkout backend's call), or every merchant's (an operator's). Operators
// say so with AnyMerchant; the zero Scope reaches no order at all, so that
// a merchant id left empty by mistake never widens a call to everyone's
// orders.
type Scope struct {
	merchantID string
	any        bool
}

// ForMerchant is the scope of merchant id's orders alone.
func ForMerchant(id string) Scope { return Scope{merchantID: id} }

// AnyMerchant is the operators' scope: every merchant's orders.
var AnyMerchant = Scope{any: true}

// IsAnyMerchant reports whether s reaches every merchant's orders.
func (s Scope) IsAnyMerchant() bool { return s.any }

// MerchantID is the merchant whose orders s reaches, or "" for
// AnyMerchant and for the zero Scope.
func (s Scope) MerchantID() string { return s.merchantID }
