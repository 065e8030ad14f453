# syntax=docker/dockerfile:1
# The settle binary, built static and run as a non-root user on distroless:
# no shell, no package manager, nothing but the binary and CA certificates
# (for HTTPS gateways). Health checks exec `settle probe <url>`.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# go.mod pins the language version; never fetch a newer toolchain.
ENV GOTOOLCHAIN=local CGO_ENABLED=0
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# -buildvcs=false: the build context may hold a .git that is a worktree
# pointer, which would fail VCS stamping.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/settle ./cmd/settle

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/settle /usr/local/bin/settle
# Numeric, so that runtimes can verify "not root" (Kubernetes runAsNonRoot).
USER 65532:65532
EXPOSE 50051 9090
ENTRYPOINT ["/usr/local/bin/settle"]
