// Package mutant builds a program with one deliberate bug, to test the
// tests: a harness that passes Settle must fail a build that, say, claims
// an order whatever its state, or its green runs prove nothing.
//
// The bug is applied at build time through `go build -overlay`, which
// compiles a mutated copy of one source file (or embedded file) in place of
// the original. The product's sources carry no build tag or switch for it,
// and the mutated copy never lands in the tree.
package mutant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Mutation replaces one piece of text in one file.
type Mutation struct {
	// File is the path of the file to mutate, relative to the module root.
	File string
	// Old is the text to replace. It must occur exactly once in File, so
	// that a change to the file cannot silently leave the build unmutated
	// (or mutated somewhere else).
	Old string
	// New replaces Old.
	New string
}

// Build builds the package pkg (such as "./cmd/settle") of the module that
// contains dir into the binary out, with ms applied (one bug may need to be
// put into several files: a statement and its generated one-row form).
func Build(ctx context.Context, dir, pkg, out string, ms ...Mutation) error {
	var err error
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	_, err = runGo(ctx, dir, ms, "build", "-o", out, pkg)
	return err
}

// Test runs `go test -count=1 -run run pkg` in the module that contains
// dir, with ms applied, and returns its output. The error is nil only when
// the tests passed: a mutant the tests catch returns an error (and so does
// a mutant that does not build; the output tells which).
func Test(ctx context.Context, dir, pkg, run string, ms ...Mutation) ([]byte, error) {
	return runGo(ctx, dir, ms, "test", "-count=1", "-run", run, pkg)
}

// runGo runs the go command with args and ms applied through -overlay,
// which follows the subcommand.
func runGo(ctx context.Context, dir string, ms []Mutation, args ...string) ([]byte, error) {
	if len(ms) == 0 {
		return nil, errors.New("mutant: no mutation")
	}
	gobin := goBinary()
	root, err := moduleRoot(ctx, gobin, dir)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "settle-mutant-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	replace := map[string]string{}
	var files []string
	for i, m := range ms {
		orig := filepath.Join(root, filepath.FromSlash(m.File))
		if _, ok := replace[orig]; ok {
			return nil, fmt.Errorf("mutant: %s is mutated twice: make it one mutation", m.File)
		}
		src, err := os.ReadFile(orig)
		if err != nil {
			return nil, fmt.Errorf("mutant: %w", err)
		}
		mutated, err := Apply(string(src), m)
		if err != nil {
			return nil, err
		}
		// The copy keeps the original's name: the compiler reports positions
		// and reads build constraints by it.
		copyPath := filepath.Join(tmp, fmt.Sprint(i), filepath.Base(orig))
		if err := os.MkdirAll(filepath.Dir(copyPath), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(copyPath, []byte(mutated), 0o644); err != nil {
			return nil, err
		}
		replace[orig] = copyPath
		files = append(files, m.File)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err != nil {
		return nil, err
	}
	overlayPath := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		return nil, err
	}
	full := append([]string{args[0], "-overlay", overlayPath}, args[1:]...)
	cmd := exec.CommandContext(ctx, gobin, full...)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		return b, fmt.Errorf("mutant: go %s with %s mutated: %w\n%s", strings.Join(args, " "), strings.Join(files, ", "), err, b)
	}
	return b, nil
}

// Apply returns src with m applied, or an error if m.Old does not occur
// exactly once in src.
func Apply(src string, m Mutation) (string, error) {
	if m.Old == "" {
		return "", fmt.Errorf("mutant: %s: no text to replace", m.File)
	}
	switch n := strings.Count(src, m.Old); n {
	case 1:
		return strings.Replace(src, m.Old, m.New, 1), nil
	case 0:
		return "", fmt.Errorf("mutant: %s does not contain %q: has the code moved? update the mutation", m.File, m.Old)
	default:
		return "", fmt.Errorf("mutant: %s contains %q %d times, not once: make the text to replace unique", m.File, m.Old, n)
	}
}

// moduleRoot is the directory of the go.mod that governs dir.
func moduleRoot(ctx context.Context, gobin, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, gobin, "env", "GOMOD")
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("mutant: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(b))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("mutant: " + dir + " is not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}

// goBinary is the go command: the one in PATH, or else the one under
// GOROOT, which go test sets when it runs a test binary.
func goBinary() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}
