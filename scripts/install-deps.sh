#!/usr/bin/env bash
# Installs every Debian package dlock needs to build and test. Idempotent:
# packages already present are skipped; apt-get update runs once, only if
# something is missing.
#
# ZooKeeper: the server (run by scripts/zookeeper-server.sh, slf4j-simple for its log),
# the C client (libzookeeper-mt-dev), and for the interop tests and benchmarks Apache
# Curator with a javac to build tests/interop/java/CuratorTool.java, and kazoo.
# dpkg-dev and binutils: cpack -G DEB (dpkg-shlibdeps) and the install test (nm, readelf).
# doxygen: the API reference (a test builds it without warnings); python3-matplotlib:
# bench/plot's charts (a test draws them). libcpp-httplib-dev, nginx-light, apache2-utils, curl:
# the inventory-service example behind nginx under ab's load (a test runs it).
# clang and libclang-rt-14-dev: the libFuzzer targets (tests/fuzz, the "fuzz" preset).
# libasio-dev: standalone Asio for dlock/asio.h's coroutine tests (the library does not need it).
# python3-tooz: the file:// benchmark's peer (bench/peers/tooz_peer.py).
# python3-psycopg2: tooz's postgresql driver, bench/postgres.sh's peer (the same tooz_peer.py).
# python3-pymysql: tooz's mysql driver, bench/mysql.sh's peer (the same tooz_peer.py).
# libpq-dev, postgresql: the postgres:// backend and the throw-away server its tests start.
# libmariadb-dev (MariaDB Connector/C) and mariadb-server: the mysql:// backend and
# the server its tests start (scripts/mariadb-server.sh).
# etcd-server, etcd-client, libgrpc++-dev, libprotobuf-dev, protobuf-compiler(-grpc): the
# etcd:// backend (gRPC stubs generated at build time from etcd's .proto files, which
# scripts/etcd-protos.sh unpacks into a cache without installing the Go toolchain), the
# servers its tests start (scripts/etcd-server.sh, with curl for the readiness check),
# etcdctl for the interop tests, and python3-etcd3 for bench/etcd.sh's tooz peer.
# openssl: scripts/test-ca.sh, the throw-away CA and certificates of the TLS tests.
# iptables and iproute2: the nemesis suite's network partitions (a worker in a network
# namespace of the test's own, cut off by an iptables DROP on its veth).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git dpkg-dev binutils
  libgtest-dev libgmock-dev
  libsqlite3-dev sqlite3
  libpq-dev postgresql
  libcli11-dev nlohmann-json3-dev
  libhiredis-dev redis-server redis-tools
  python3 python3-redis python3-tooz python3-psycopg2 python3-pymysql
  zookeeper libzookeeper-mt-dev libslf4j-java
  default-jdk-headless libcurator-recipes-java python3-kazoo
  doxygen python3-matplotlib
  libcpp-httplib-dev nginx-light apache2-utils curl
  clang libclang-rt-14-dev
  libasio-dev
  libmariadb-dev mariadb-server
  etcd-server etcd-client curl
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc python3-etcd3
  iptables iproute2
  openssl
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  "$(dirname "$0")/etcd-protos.sh"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
"$(dirname "$0")/etcd-protos.sh"
echo "install-deps: done"
