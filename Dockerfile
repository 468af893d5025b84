# syntax=docker/dockerfile:1
# RingRelay container image: the Swift toolchain builds, a slim Debian runs.
#
#   docker build --build-arg RINGRELAY_COMMIT="$(git describe --always --dirty --abbrev=12 --exclude='*')" -t ringrelay .
#   docker run --rm -p 8080:8080 -v ringrelay-data:/var/lib/ringrelay ringrelay
#
# The runtime stage holds the binary (Swift runtime and Foundation linked in statically), its
# resource bundle, Swift's crash backtracer, and the Debian packages listed below; nothing else.
# scripts/check-container-root builds a clean Debian root from exactly that list and runs the
# binary in it (docs/DEPLOYING.md, "How this was checked").

ARG SWIFT_IMAGE=swift:6.3.1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---- build ---------------------------------------------------------------------------------
FROM ${SWIFT_IMAGE} AS build
WORKDIR /src

# Dependencies first: this layer is reused until Package.swift changes. Package.resolved is not
# checked in, so the image resolves the newest versions Package.swift allows when it is built,
# not necessarily the ones the tests last ran with.
COPY Package.swift ./
RUN swift package resolve

# SwiftPM loads the package only with every folder its manifest names: each target's (tests
# included, with their resources) and the CommitStamp plugin's. DeploymentFilesTests checks
# that these lines cover them all.
COPY Sources ./Sources
COPY Tests ./Tests
COPY Plugins ./Plugins

# The commit `ringrelay --version` prints. The build context has no .git (.dockerignore), so the
# CommitStamp plugin takes it from this argument; without one the version says `commit unknown`.
# Declared here, after the dependencies, so that a new commit rebuilds only what follows.
ARG RINGRELAY_COMMIT=

# --static-swift-stdlib links the Swift runtime, Foundation and Dispatch into the binary, so the
# runtime image needs no Swift libraries. Debug info is stripped (symbols stay, so crash
# backtraces still name functions): 200 MB down to 125 MB.
RUN swift build -c release --static-swift-stdlib --product ringrelay \
    && bin="$(swift build -c release --static-swift-stdlib --show-bin-path)" \
    && mkdir -p /staging \
    && cp "$bin/ringrelay" /staging/ \
    && cp -R "$bin/ringrelay_RingRelayServer.resources" /staging/ \
    && strip --strip-debug /staging/ringrelay \
    && cp /usr/libexec/swift/linux/swift-backtrace-static /staging/

# ---- runtime -------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE}

# What the binary needs beyond the base image (see `ldd ringrelay`): libcurl4, because Foundation's
# networking module is linked in; ca-certificates, the roots APNs' and FCM's TLS certificates are
# checked against; curl, for the health check below (it adds only its executable to libcurl4).
# libstdc++6 and zlib1g are in the base image already and named so that stays true. libjemalloc2
# is the memory allocator the server runs on (LD_PRELOAD below).
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get -q update \
    && apt-get -q install -y --no-install-recommends ca-certificates curl libcurl4 libjemalloc2 libstdc++6 zlib1g \
    && rm -rf /var/lib/apt/lists/*

# A fixed uid, so a bind-mounted data directory can be chowned to it (chown 10001:10001 DIR).
RUN groupadd --system --gid 10001 ringrelay \
    && useradd --system --uid 10001 --gid ringrelay --no-create-home --home-dir /var/lib/ringrelay \
        --shell /usr/sbin/nologin ringrelay \
    && install -d -o ringrelay -g ringrelay -m 0700 /var/lib/ringrelay

# The resource bundle must sit beside the binary (GET /openapi.yaml reads it).
COPY --from=build /staging /app
RUN ln -s /app/ringrelay /usr/local/bin/ringrelay

# The container's address and port are fixed here (publish another port with -p instead); the
# data directory is the volume. Everything else comes from the environment (.env.example).
#
# jemalloc replaces glibc's malloc: a Swift server allocates and frees small objects across threads
# all the time, and on glibc's allocator a webhook took about 8 % more CPU (docs/BENCHMARKS.md,
# "The allocator"). A bare name, so the loader finds it on any architecture's library path.
ENV RINGRELAY_HOST=0.0.0.0 \
    RINGRELAY_PORT=8080 \
    RINGRELAY_DATA_DIR=/var/lib/ringrelay \
    LD_PRELOAD=libjemalloc.so.2 \
    SWIFT_BACKTRACE=enable=yes,sanitize=yes,threads=all,images=all,interactive=no,swift-backtrace=/app/swift-backtrace-static

USER ringrelay:ringrelay
WORKDIR /app
VOLUME /var/lib/ringrelay
EXPOSE 8080

# Ready means: HTTP answers and the database answers a query. Exec form, no shell involved.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["curl", "--fail", "--silent", "--show-error", "--max-time", "4", "--output", "/dev/null", "http://127.0.0.1:8080/readyz"]

# SIGTERM (docker stop) drains: live devices get close 1001, requests finish within
# RINGRELAY_SHUTDOWN_GRACE (10 s); give `docker stop -t` / stop_grace_period more than that.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/app/ringrelay"]
CMD ["serve"]
