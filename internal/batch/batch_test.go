package batch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/settlepay/settle/internal/batch"
)

// recorder is a Run that doubles each input's number, records the groups it
// is given, and, while gate is set, blocks each run until the test releases
// it. An input "bad-..." fails any group it is in.
type recorder struct {
	mu     sync.Mutex
	groups [][]string
	gate   chan struct{}
}

func (r *recorder) run(ctx context.Context, ins []string) ([]string, error) {
	r.mu.Lock()
	r.groups = append(r.groups, slices.Clone(ins))
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	outs := make([]string, len(ins))
	for i, in := range ins {
		if strings.HasPrefix(in, "bad") {
			return nil, fmt.Errorf("%s is bad", in)
		}
		outs[i] = "out-" + in
	}
	return outs, nil
}

func (r *recorder) Groups() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.groups)
}

// key is the part of an input before "#": inputs "a#1" and "a#2" are about
// one thing.
func key(in string) string { k, _, _ := strings.Cut(in, "#"); return k }

func newBatcher(r *recorder, max int) *batch.Batcher[string, string, string] {
	return batch.New(batch.Config[string, string, string]{Run: r.run, Key: key, MaxSize: max})
}

type result struct {
	out string
	err error
}

// start runs Do(in) in a goroutine and returns where its result will be.
func start(ctx context.Context, b *batch.Batcher[string, string, string], in string) chan result {
	ch := make(chan result, 1)
	go func() {
		out, err := b.Do(ctx, in)
		ch <- result{out, err}
	}()
	return ch
}

// TestLoneCallRunsAtOnce: a call with no other in flight runs its group of
// one at once: no timer, no waiting for company.
func TestLoneCallRunsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		b := newBatcher(r, 64)
		begin := time.Now()
		out, err := b.Do(context.Background(), "a")
		if err != nil || out != "out-a" {
			t.Fatalf("Do(a) = %q, %v", out, err)
		}
		// Time in the bubble moves only when every goroutine waits for it.
		if waited := time.Since(begin); waited != 0 {
			t.Errorf("a lone call waited %v", waited)
		}
		if got := r.Groups(); got != "[[a]]" {
			t.Errorf("groups %s, want [[a]]", got)
		}
	})
}

// TestGroups: calls that arrive while a group runs go together in the
// next, one per key and at most MaxSize; the rest go in the one after.
func TestGroups(t *testing.T) {
	for _, tc := range []struct {
		max  int
		ins  []string
		want string
	}{
		{64, []string{"b", "c", "d"}, "[[a] [b c d]]"},
		{64, []string{"b#1", "c", "b#2", "d"}, "[[a] [b#1 c d] [b#2]]"},
		{2, []string{"b", "c", "d", "e", "f"}, "[[a] [b c] [d e] [f]]"},
		{2, []string{"b#1", "b#2", "c", "b#3"}, "[[a] [b#1 c] [b#2] [b#3]]"},
	} {
		t.Run(fmt.Sprint(tc.ins, tc.max), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				gate := make(chan struct{})
				r := &recorder{gate: gate}
				b := newBatcher(r, tc.max)
				ctx := context.Background()
				results := map[string]chan result{"a": start(ctx, b, "a")}
				synctest.Wait() // a leads, and runs
				for _, in := range tc.ins {
					results[in] = start(ctx, b, in)
					synctest.Wait() // queued in this order
				}
				close(gate)
				for in, ch := range results {
					if res := <-ch; res.err != nil || res.out != "out-"+in {
						t.Errorf("Do(%s) = %q, %v; want its own output", in, res.out, res.err)
					}
				}
				if got := r.Groups(); got != tc.want {
					t.Errorf("groups %s, want %s", got, tc.want)
				}
			})
		})
	}
}

// TestFailingGroupRetriesAlone: an input that fails its group fails only
// its own call; the others are run again alone and succeed.
func TestFailingGroupRetriesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		r := &recorder{gate: gate}
		b := newBatcher(r, 64)
		ctx := context.Background()
		results := map[string]chan result{"a": start(ctx, b, "a")}
		synctest.Wait()
		for _, in := range []string{"b", "bad", "c"} {
			results[in] = start(ctx, b, in)
			synctest.Wait()
		}
		close(gate)
		for in, ch := range results {
			res := <-ch
			if in == "bad" {
				if res.err == nil || res.err.Error() != "bad is bad" {
					t.Errorf("Do(bad) = %q, %v; want its own error", res.out, res.err)
				}
			} else if res.err != nil || res.out != "out-"+in {
				t.Errorf("Do(%s) = %q, %v; want its own output", in, res.out, res.err)
			}
		}
		if got, want := r.Groups(), "[[a] [b bad c] [b] [bad] [c]]"; got != want {
			t.Errorf("groups %s, want %s", got, want)
		}
	})
}

// TestFailingGroupNotIsolated: an error that Isolate refuses fails every
// call of the group, with no run alone.
func TestFailingGroupNotIsolated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		r := &recorder{gate: gate}
		down := errors.New("down")
		b := batch.New(batch.Config[string, string, string]{
			Run: func(ctx context.Context, ins []string) ([]string, error) {
				if _, err := r.run(ctx, ins); err != nil {
					return nil, err
				}
				if len(ins) > 1 {
					return nil, down
				}
				return []string{"out-" + ins[0]}, nil
			},
			Key: key, MaxSize: 64,
			Isolate: func(err error) bool { return !errors.Is(err, down) },
		})
		ctx := context.Background()
		a := start(ctx, b, "a")
		synctest.Wait()
		var bc []chan result
		for _, in := range []string{"b", "c"} {
			bc = append(bc, start(ctx, b, in))
			synctest.Wait()
		}
		close(gate)
		if res := <-a; res.err != nil {
			t.Errorf("Do(a): %v", res.err)
		}
		for _, ch := range bc {
			if res := <-ch; !errors.Is(res.err, down) {
				t.Errorf("a call of the failed group: %q, %v; want the group's error", res.out, res.err)
			}
		}
		if got := r.Groups(); got != "[[a] [b c]]" {
			t.Errorf("groups %s, want [[a] [b c]]", got)
		}
	})
}

// TestLeaderCancelled: the group does not fail because its leader's caller
// went away; the calls behind the leader get their outputs.
func TestLeaderCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		r := &recorder{gate: gate}
		b := newBatcher(r, 64)
		a := start(context.Background(), b, "a")
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		leader := start(ctx, b, "b") // leads the next group
		synctest.Wait()
		follower := start(context.Background(), b, "c")
		synctest.Wait()
		cancel()
		close(gate)
		for in, ch := range map[string]chan result{"a": a, "b": leader, "c": follower} {
			if res := <-ch; res.err != nil || res.out != "out-"+in {
				t.Errorf("Do(%s) = %q, %v; want its own output", in, res.out, res.err)
			}
		}
		if got := r.Groups(); got != "[[a] [b c]]" {
			t.Errorf("groups %s, want [[a] [b c]]", got)
		}
	})
}

// TestWrongOutputCount: a Run that breaks its contract fails its calls
// rather than handing one call another's output.
func TestWrongOutputCount(t *testing.T) {
	b := batch.New(batch.Config[string, string, string]{
		Run:     func(context.Context, []string) ([]string, error) { return nil, nil },
		Key:     key,
		MaxSize: 64,
	})
	if _, err := b.Do(context.Background(), "a"); err == nil {
		t.Error("no error for a Run that returned no output")
	}
}

// TestConcurrent: many callers at once (run it with -race): every call
// returns its own output exactly once, every input is run in exactly one
// group that succeeded, no group holds a key twice or exceeds MaxSize, and
// no call is lost (each Do returns) or woken twice (which would block a
// leader on a full wake channel).
func TestConcurrent(t *testing.T) {
	const callers, calls, max = 16, 200, 8
	var (
		mu   sync.Mutex
		runs = map[string]int{}
		bad  []string
	)
	b := batch.New(batch.Config[string, string, string]{
		Run: func(ctx context.Context, ins []string) ([]string, error) {
			seen := map[string]bool{}
			for _, in := range ins {
				if seen[key(in)] {
					mu.Lock()
					bad = append(bad, fmt.Sprint("two inputs of one key in ", ins))
					mu.Unlock()
				}
				seen[key(in)] = true
			}
			if len(ins) > max {
				mu.Lock()
				bad = append(bad, fmt.Sprint("group over MaxSize: ", ins))
				mu.Unlock()
			}
			outs := make([]string, len(ins))
			for i, in := range ins {
				if strings.HasPrefix(in, "bad") {
					return nil, errors.New("bad input")
				}
				outs[i] = "out-" + in
			}
			mu.Lock()
			for _, in := range ins {
				runs[in]++
			}
			mu.Unlock()
			return outs, nil
		},
		Key:     key,
		MaxSize: max,
	})
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				// Keys repeat across callers, so groups meet the key rule.
				in := fmt.Sprintf("k%d#%d-%d", i%5, c, i)
				if i%37 == 0 {
					in = "bad" + in
				}
				out, err := b.Do(context.Background(), in)
				if strings.HasPrefix(in, "bad") {
					if err == nil {
						t.Errorf("Do(%s): no error", in)
					}
					continue
				}
				if err != nil || out != "out-"+in {
					t.Errorf("Do(%s) = %q, %v", in, out, err)
				}
			}
		}()
	}
	wg.Wait()
	for _, s := range bad {
		t.Error(s)
	}
	ok := 0
	for in, n := range runs {
		if n != 1 {
			t.Errorf("%s was run in %d groups that succeeded, want 1", in, n)
		}
		ok++
	}
	if want := callers * (calls - (calls+36)/37); ok != want {
		t.Errorf("%d inputs run, want %d", ok, want)
	}
}
