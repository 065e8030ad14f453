// Package clientaddr says which connections come from one client, for the
// limits that the gRPC and webhook listeners count per client address.
package clientaddr

import "net"

// Prefixes say what one client address is: the connections whose IPv4
// addresses share their first V4 bits, or whose IPv6 addresses share their
// first V6 bits.
type Prefixes struct{ V4, V6 int }

// Default counts one IPv4 address, or one IPv6 /64, which one host
// commonly holds whole.
var Default = Prefixes{V4: 32, V6: 64}

// Key is the client address of a connection's remote address: its IPv4
// /V4 or IPv6 /V6 network in CIDR notation, or the IP alone when the
// prefix is the whole address. An IPv4-mapped IPv6 address is IPv4.
func (p Prefixes) Key(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		if addr == nil {
			return "unknown"
		}
		return addr.Network()
	}
	ip, bits, ones := tcp.IP, 128, p.V6
	if ip4 := ip.To4(); ip4 != nil {
		ip, bits, ones = ip4, 32, p.V4
	}
	if ones >= bits {
		return ip.String()
	}
	mask := net.CIDRMask(ones, bits)
	return (&net.IPNet{IP: ip.Mask(mask), Mask: mask}).String()
}
