package clientaddr

import (
	"net"
	"testing"
)

// TestKey: the per-address limits count an IPv4 address, or an
// IPv6 /64, unless configured otherwise.
func TestKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v4, v6 int
		ip     string
		want   string
	}{
		{32, 64, "203.0.113.7", "203.0.113.7"},
		{32, 64, "2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{32, 64, "2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"},
		{32, 64, "::ffff:203.0.113.7", "203.0.113.7"}, // IPv4-mapped is IPv4
		{24, 48, "203.0.113.7", "203.0.113.0/24"},
		{24, 48, "2001:db8:1:2::1", "2001:db8:1::/48"},
		{32, 128, "2001:db8::1", "2001:db8::1"},
	} {
		if got := (Prefixes{V4: c.v4, V6: c.v6}).Key(&net.TCPAddr{IP: net.ParseIP(c.ip), Port: 443}); got != c.want {
			t.Errorf("/%d, /%d: %s is client address %s, want %s", c.v4, c.v6, c.ip, got, c.want)
		}
	}
}
