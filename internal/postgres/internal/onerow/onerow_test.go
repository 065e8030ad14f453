package onerow_test

import (
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/postgres/internal/onerow"
)

func TestDerive(t *testing.T) {
	got, err := onerow.Derive(`WITH r AS (
	SELECT * FROM unnest((SELECT @id::uuid[]), (SELECT @n::int[])) WITH ORDINALITY AS r(id, n, i)
)
UPDATE t SET n = r.n FROM r WHERE t.id = r.id AND t.id = ANY((SELECT @id::uuid[])::uuid[]);
`)
	if err != nil {
		t.Fatal(err)
	}
	want := `WITH r AS NOT MATERIALIZED (
	SELECT @id::uuid AS id, @n::int AS n, 1::bigint AS i
)
UPDATE t SET n = r.n FROM r WHERE t.id = r.id AND t.id = @id::uuid;
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestDeriveRefuses(t *testing.T) {
	for name, src := range map[string]string{
		"no unnest":         `SELECT * FROM t WHERE id = @id`,
		"no ordinality":     `SELECT * FROM unnest(@id::uuid[]) AS r(id)`,
		"argument misnamed": `SELECT * FROM unnest((SELECT @ids::uuid[])) WITH ORDINALITY AS r(id, i)`,
		"not an argument":   `SELECT * FROM unnest((SELECT array[1])) WITH ORDINALITY AS r(id, i)`,
		"array planned":     `SELECT * FROM unnest(@id::uuid[]) WITH ORDINALITY AS r(id, i)`,
		"array left": `SELECT * FROM unnest((SELECT @id::uuid[])) WITH ORDINALITY AS r(id, i)
			JOIN t ON t.x = ANY((SELECT @other::uuid[])::uuid[])`,
	} {
		if got, err := onerow.Derive(src); err == nil {
			t.Errorf("%s: derived %q, want an error", name, strings.TrimSpace(got))
		}
	}
}
