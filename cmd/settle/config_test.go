package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestDocsConfigTable keeps the operator's guide's configuration table
// equal to what the binary knows.
func TestDocsConfigTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(doc), "<!-- config:begin -->\n")
	table, _, ok2 := strings.Cut(rest, "<!-- config:end -->")
	if !ok1 || !ok2 {
		t.Fatal("docs/operations.md has no config:begin/config:end markers")
	}
	var want bytes.Buffer
	printReferenceTable(&want)
	if table != want.String() {
		t.Fatalf("docs/operations.md's configuration table is stale; replace it with the output of `settle config -markdown`:\n%s", want.String())
	}
}
