//go:build settle_mutant

package postgres

// claimGuard, in the deliberately broken build that proves the chaos
// harness can fail, claims an order whatever its state: a second click on a
// CHARGING or PAID order charges again. Never build Settle with this tag
// but to test the tests.
func claimGuard(string) string { return "true" }
