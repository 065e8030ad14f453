package mutant_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/lab/mutant"
)

var (
	goGuard  = mutant.Mutation{File: "cmd/m/guard.go", Old: `"state = $6"`, New: `"true"`}
	sqlGuard = mutant.Mutation{File: "cmd/m/q.sql", Old: "ord.state = @from_state", New: "true"}
)

// TestBuild builds a small module with a mutation in a Go file and one in
// an embedded file, and runs it: the binary has both, and the sources are
// untouched.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.24\n",
		"cmd/m/main.go": `package main

import (
	_ "embed"
	"fmt"
)

//go:embed q.sql
var query string

func main() { fmt.Print(guard(), " ", query) }
`,
		"cmd/m/guard.go": "package main\n\nfunc guard() string { return \"state = $6\" }\n",
		"cmd/m/q.sql":    "WHERE ord.state = @from_state\n",
	}
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		ms   []mutant.Mutation
		want string
	}{
		{"go", []mutant.Mutation{goGuard}, "true WHERE ord.state = @from_state\n"},
		{"embedded", []mutant.Mutation{sqlGuard}, "state = $6 WHERE true\n"},
		{"both", []mutant.Mutation{goGuard, sqlGuard}, "true WHERE true\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "m")
			if err := mutant.Build(context.Background(), dir, "./cmd/m", bin, tc.ms...); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin).Output()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("the mutant prints %q, want %q", out, tc.want)
			}
			for _, m := range tc.ms {
				src, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(m.File)))
				if err != nil {
					t.Fatal(err)
				}
				if string(src) != files[m.File] {
					t.Errorf("the source was changed: %q", src)
				}
			}
		})
	}
}

// TestApplyOnce: a mutation whose text is missing or not unique is refused,
// so that a moved guard cannot leave the "mutant" build correct and the
// test that expects it to fail proving nothing.
func TestApplyOnce(t *testing.T) {
	src := "a = $1 AND b = $2 AND a = $1"
	if got, err := mutant.Apply(src, mutant.Mutation{File: "f", Old: "b = $2", New: "true"}); err != nil || got != "a = $1 AND true AND a = $1" {
		t.Errorf("Apply = %q, %v", got, err)
	}
	for _, old := range []string{"c = $3", "a = $1", ""} {
		_, err := mutant.Apply(src, mutant.Mutation{File: "f", Old: old, New: "true"})
		if err == nil {
			t.Errorf("Apply with Old %q: no error", old)
		} else if !strings.Contains(err.Error(), "f") {
			t.Errorf("Apply with Old %q: error %q does not name the file", old, err)
		}
	}
}

// TestBuildRefusesMissingText: Build fails, before building, when the text
// is not in the file.
func TestBuildRefusesMissingText(t *testing.T) {
	err := mutant.Build(context.Background(), ".", "./cmd/settle", filepath.Join(t.TempDir(), "x"),
		mutant.Mutation{File: "go.mod", Old: "no such text", New: ""})
	if err == nil || !strings.Contains(err.Error(), "does not contain") {
		t.Fatalf("Build = %v, want a refusal", err)
	}
}
