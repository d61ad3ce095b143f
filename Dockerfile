# walissh in a container: built in one stage, run from a slim Debian as the
# unprivileged `walissh` user. Not built on the project's CI machines (they
# have no container engine); see docs/operations.md.
#
#   docker build -t walissh .
#   docker run --init --stop-timeout 30 -p 2222:2222 \
#       -v walissh-state:/var/lib/walissh \
#       -v $PWD/walissh.toml:/etc/walissh/walissh.toml:ro walissh
#
# --init: a local target's shells are walissh's children; an init reaps
# what they leave behind. --stop-timeout: on SIGTERM walissh gives
# sessions 10 s to end and connections 5 s more, then flushes the audit;
# Docker's default 10 s would kill it before the audit is closed.
#
# The shipped config has no user and listens on loopback, so the container
# refuses to start until you mount your own config over
# /etc/walissh/walissh.toml, with users and listen = ["0.0.0.0:2222"].
# State (audit, recordings, host keys) is kept in /var/lib/walissh: keep
# that on a volume.

# The toolchain rust-toolchain.toml pins.
FROM rust:1.95-bookworm AS build
WORKDIR /src
# The dependencies first, in a layer of their own (built for an empty
# walissh and empty redactor and policy crates, the workspace's three
# members): a change to walissh's code rebuilds walissh alone.
COPY Cargo.toml Cargo.lock rust-toolchain.toml ./
COPY crates/walissh-redact/Cargo.toml crates/walissh-redact/
COPY crates/walissh-policy/Cargo.toml crates/walissh-policy/
COPY vendor vendor
RUN mkdir src crates/walissh-redact/src crates/walissh-policy/src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs crates/walissh-redact/src/lib.rs crates/walissh-policy/src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src crates/walissh-redact/src crates/walissh-policy/src
COPY . .
# The release profile keeps line tables for profiling (debug = 1): the
# image's binary goes without them. `touch`: newer than the empty build.
RUN touch src/main.rs src/lib.rs crates/walissh-redact/src/lib.rs crates/walissh-policy/src/lib.rs \
    && cargo build --release --locked \
    && strip --strip-debug target/release/walissh

FROM debian:bookworm-slim
# bash: the shell integration's local targets and the agent's clean
# commands; ca-certificates: the model endpoint over HTTPS.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bash ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home-dir /var/lib/walissh --shell /usr/sbin/nologin walissh \
    && install -d -m 0700 -o walissh -g walissh /var/lib/walissh \
    && install -d -m 0755 /etc/walissh /usr/share/walissh
COPY --from=build /src/target/release/walissh /usr/bin/walissh
COPY packaging/man /usr/share/man/man1
COPY --chown=root:walissh --chmod=0640 etc/walissh.toml /etc/walissh/walissh.toml
COPY etc/skills /usr/share/walissh/skills
USER walissh
EXPOSE 2222
STOPSIGNAL SIGTERM
VOLUME ["/var/lib/walissh"]
ENTRYPOINT ["/usr/bin/walissh"]
CMD ["serve", "--config", "/etc/walissh/walissh.toml"]
