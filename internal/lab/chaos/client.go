package chaos

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// apiKey returns a new random API key for the clients.
func apiKey() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "sk_chaos_" + hex.EncodeToString(b)
}

// keyLine is the SETTLE_API_KEYS entries of the clients' key and of the
// operator's (opsKey): each key's hash, the merchant, the role, a name.
func keyLine(key string) string {
	sum, ops := sha256.Sum256([]byte(key)), sha256.Sum256([]byte(opsKey(key)))
	return hex.EncodeToString(sum[:]) + " " + merchant + " checkout chaos-checkout; " +
		hex.EncodeToString(ops[:]) + " " + merchant + " ops chaos-ops"
}

// opsKey is the operator's key that goes with the clients' key: it
// changes the merchant's route rules during the run.
func opsKey(key string) string { return key + "_ops" }

// bearer sends an API key with every call, over plaintext loopback.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// dial connects to a replica with the clients' API key, reconnecting
// quickly after it restarts.
func dial(addr, key string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(key)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}))
}

// freePort finds a free port outside the kernel's ephemeral range, so that
// no outgoing connection takes it while its replica is down.
func freePort() (string, error) {
	rng := newRand(uint64(time.Now().UnixNano()))
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rng.IntN(12000))
		l, err := net.Listen("tcp", addr)
		if err == nil {
			l.Close()
			return addr, nil
		}
	}
	return "", errors.New("chaos: no free port found for a replica")
}
