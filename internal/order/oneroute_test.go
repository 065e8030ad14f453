package order

import (
	"strconv"
	"testing"
)

// TestOneRouteForgetsItsOldest checks that oneRoute stays bounded: past
// its capacity it forgets its oldest orders, whose charges then read
// their routing again, and holds its newest.
func TestOneRouteForgetsItsOldest(t *testing.T) {
	t.Parallel()
	var c oneRoute
	for i := range oneRouteCap + 10 {
		c.add("m", strconv.Itoa(i))
	}
	c.add("m", strconv.Itoa(oneRouteCap+9)) // already held: nothing forgotten
	for i := range 10 {
		if c.holds("m", strconv.Itoa(i)) {
			t.Errorf("order %d is still held past the capacity", i)
		}
	}
	for _, i := range []int{10, oneRouteCap, oneRouteCap + 9} {
		if !c.holds("m", strconv.Itoa(i)) {
			t.Errorf("order %d is not held", i)
		}
	}
	if c.holds("other", "10") {
		t.Error("another merchant's order of the same id is held")
	}
	if len(c.has) != oneRouteCap {
		t.Errorf("%d orders held, want %d", len(c.has), oneRouteCap)
	}
}
