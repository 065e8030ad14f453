package grpcapi_test

import (
	"context"
	"slices"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

func TestHealthFollowsDatabase(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.srv.WatchHealth(ctx, s.pool.Ping, 50*time.Millisecond)
	health := healthpb.NewHealthClient(s.conn)
	waitFor := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "settle.v1.OrderService"})
			if err == nil && resp.GetStatus() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health is %v (%v), want %v", resp.GetStatus(), err, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(healthpb.HealthCheckResponse_SERVING)
	postgrestest.Drop(t, s.url) // the database goes away
	waitFor(healthpb.HealthCheckResponse_NOT_SERVING)
}

func TestReflectionListsServices(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stream, err := reflectionpb.NewServerReflectionClient(s.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range resp.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	for _, want := range []string{"settle.v1.OrderService", "settle.v1.OpsService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
}
