package audit

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestPipeline: pages reach match whole and in listing order, the last
// one short; an error of match stops the listing; an error of the listing
// comes after the pages listed before it were matched.
func TestPipeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	listTo := func(n int, fail error) func(context.Context, func(int) error) error {
		return func(ctx context.Context, add func(int) error) error {
			for i := range n {
				if err := add(i); err != nil {
					return err
				}
			}
			return fail
		}
	}

	var pages [][]int
	err := pipeline(ctx, 3, listTo(8, nil), func(p []int) error { pages = append(pages, p); return nil })
	if err != nil || !slices.EqualFunc(pages, [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7}}, slices.Equal) {
		t.Fatalf("pages %v, %v; want [[0 1 2] [3 4 5] [6 7]], nil", pages, err)
	}

	broken := errors.New("the database went away")
	var listed int
	list := func(ctx context.Context, add func(int) error) error {
		for i := 0; ; i++ {
			if err := add(i); err != nil {
				return err
			}
			listed = i + 1
		}
	}
	matched := 0
	err = pipeline(ctx, 2, list, func([]int) error {
		if matched++; matched == 2 {
			return broken
		}
		return nil
	})
	if !errors.Is(err, broken) || listed > 2*4 {
		t.Fatalf("after match failed on the 2nd page: %v, %d listed; want its error, the listing stopped", err, listed)
	}

	gone := errors.New("the gateway went away")
	pages = nil
	err = pipeline(ctx, 2, listTo(5, gone), func(p []int) error { pages = append(pages, p); return nil })
	if !errors.Is(err, gone) || !slices.EqualFunc(pages, [][]int{{0, 1}, {2, 3}}, slices.Equal) {
		t.Fatalf("after the listing failed: pages %v, %v; want [[0 1] [2 3]] matched, then its error", pages, err)
	}
}
