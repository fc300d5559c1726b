# mpiscope image: the same set-up and build a user runs (`make setup`, `make build`).
FROM debian:bookworm
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Only what `make setup` itself needs to start; it installs the rest.
RUN apt-get update && apt-get install -y --no-install-recommends make python3 python3-pip ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/mpiscope
COPY . .
RUN make setup
RUN make build
EXPOSE 8050
CMD ["mpiscope", "--help"]
