//go:build ignore

// gen_onerow writes the one-row form of a statement written for arrays (see
// package onerow): go run gen_onerow.go src.sql dst.sql.
package main

import (
	"log"
	"os"

	"github.com/settlepay/settle/internal/postgres/internal/onerow"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: go run gen_onerow.go src.sql dst.sql")
	}
	src, err := os.ReadFile(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	out, err := onerow.File(os.Args[1], string(src))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(os.Args[2], []byte(out), 0o644); err != nil {
		log.Fatal(err)
	}
}
