//go:build !settle_mutant

package postgres

// claimGuard is the claim's condition on the order row rel: it must be in
// the state the claim moves it from.
func claimGuard(rel string) string { return rel + ".state = $6" }
