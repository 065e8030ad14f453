// Package examples holds no code of Settle's: it is the home of the
// example clients in the stacks Settle's merchants use (node/: a BullMQ
// worker over gRPC and a Standard Webhooks receiver; php/: a queue job over
// the JSON API and a webhook verifier), and of the tests that run each of
// them against a real settle dev, kill its worker in the middle of a charge
// and check that the gateway simulator's ledger shows one charge.
package examples
