package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestReadmeConfigTable keeps the README's configuration table equal to
// what the binary knows.
func TestReadmeConfigTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(readme), "<!-- config:begin -->\n")
	table, _, ok2 := strings.Cut(rest, "<!-- config:end -->")
	if !ok1 || !ok2 {
		t.Fatal("README.md has no config:begin/config:end markers")
	}
	var want bytes.Buffer
	printReference(&want)
	if table != want.String() {
		t.Fatalf("README.md's configuration table is stale; replace it with the output of `settle config`:\n%s", want.String())
	}
}
