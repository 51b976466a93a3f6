# The daemon as a container: built with the Rust toolchain, run on Debian slim as a user without
# privileges. The configuration is read from /etc/delayer/delayer.conf: mount yours there (the
# one built in is dist/delayer.conf, which logs to stdout and expects Redis at 127.0.0.1:6379).
#
#   docker build -t delayer .
#   docker run --rm -v "$PWD/my.conf:/etc/delayer/delayer.conf:ro" delayer
#   docker compose -f dist/docker/compose.yaml up     # with a Redis beside it

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p delayer

FROM debian:bookworm-slim
# The Kafka link's librdkafka speaks TLS through OpenSSL.
RUN apt-get update && apt-get install -y --no-install-recommends libssl3 \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin delayer
COPY --from=build /src/target/release/delayer /usr/bin/delayer
COPY dist/delayer.conf /etc/delayer/delayer.conf
USER delayer
ENTRYPOINT ["/usr/bin/delayer"]
CMD ["-c", "/etc/delayer/delayer.conf"]
