package bench

import "testing"

// The round trips of the pgbench scripts are counted from their text; the
// counts must be what the scripts' comments, sql/README.md and
// docs/contributing.md say.
func TestScriptRoundTrips(t *testing.T) {
	for script, want := range map[string]int{"floor.sql": 3, "naive.sql": 16, "floor_one_call.sql": 2, "settle_floor.sql": 1, "floor_refund.sql": 2, "floor_capture.sql": 2} {
		got, err := scriptRoundTrips(script)
		if err != nil || got != want {
			t.Errorf("scriptRoundTrips(%s) = %d, %v; want %d", script, got, err, want)
		}
	}
}
