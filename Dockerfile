# Multi-stage build of the settle binary: static, run as a non-root user.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/settle ./cmd/settle

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/settle /usr/local/bin/settle
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/settle"]
