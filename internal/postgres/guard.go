package postgres

// claimGuard is the claim's condition on the order row rel: it must be in
// the state the claim moves it from. The chaos harness's mutant test
// replaces it with "true" at build time to prove that it would catch a
// claim that ignores the state.
func claimGuard(rel string) string { return rel + ".state = $6" }
