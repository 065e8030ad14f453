package grpcapi_test

import (
	"os"
	"testing"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	_ "github.com/settlepay/settle/gen/settle/v1"
)

// apiBaseline is the API as it last landed, built by `buf build -o
// .ci/api-baseline.binpb`: .ci/run's `buf breaking` holds the messages and
// services to it, and this test its REST paths.
const apiBaseline = "../../.ci/api-baseline.binpb"

// TestHTTPAnnotationsKept: every method that had a google.api.http rule in
// the baseline has the same rule now. buf breaking does not compare custom
// options, and a JSON client calls a path: a path renamed, or a body moved
// into the query, breaks it as a renamed field breaks a gRPC one.
func TestHTTPAnnotationsKept(t *testing.T) {
	b, err := os.ReadFile(apiBaseline)
	if err != nil {
		t.Fatal(err)
	}
	// A buf image is a FileDescriptorSet on the wire (buf's own fields are
	// unknown here and kept aside).
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		t.Fatalf("read %s: %v", apiBaseline, err)
	}
	rules := 0
	for _, f := range set.GetFile() {
		for _, svc := range f.GetService() {
			for _, m := range svc.GetMethod() {
				was, ok := proto.GetExtension(m.GetOptions(), annotations.E_Http).(*annotations.HttpRule)
				if !ok || was == nil {
					continue
				}
				rules++
				name := protoreflect.FullName(f.GetPackage() + "." + svc.GetName() + "." + m.GetName())
				d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
				if err != nil {
					t.Errorf("%s: gone (it served %v)", name, was)
					continue
				}
				now, _ := proto.GetExtension(d.(protoreflect.MethodDescriptor).Options(), annotations.E_Http).(*annotations.HttpRule)
				if !proto.Equal(was, now) {
					t.Errorf("%s: its HTTP rule changed from %v to %v; add a binding (additional_bindings) instead", name, was, now)
				}
			}
		}
	}
	if rules == 0 {
		t.Fatalf("%s holds no google.api.http rule: not the annotated API", apiBaseline)
	}
}
