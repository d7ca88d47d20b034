# The outboxkit CLI (relay, migrate, status, dead-letters) as a small static image.
#   docker build -t outboxkit .
#   docker run --rm -v $PWD/outboxkit.yaml:/etc/outboxkit/outboxkit.yaml:ro outboxkit \
#     relay --config /etc/outboxkit/outboxkit.yaml --migrate
# docker-compose.yml builds and runs it next to PostgreSQL, MySQL, Kafka and Pulsar.
# Without a Docker engine: bash scripts/image.sh builds an equivalent image (FROM scratch, user
# 65532) as a tarball (docs/kubernetes.md, Image).

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so editing the code does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Every driver and client outboxkit uses is pure Go (pgx, go-sql-driver/mysql, modernc.org/sqlite,
# Sarama, pulsar-client-go), so the binary is static and runs on distroless/static.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/outboxkit ./cmd/outboxkit

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/outboxkit /usr/local/bin/outboxkit
# /metrics and /healthz (set http.listen: 0.0.0.0:9464 in the configuration).
EXPOSE 9464
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/outboxkit"]
CMD ["--help"]
