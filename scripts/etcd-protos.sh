#!/usr/bin/env bash
# Puts the .proto files of etcd's v3 API (3.4.23, the server Debian ships) and their
# imports in DIR, for the etcd:// backend's generated gRPC stubs (src/backends/etcd).
#
#   scripts/etcd-protos.sh [DIR]   default: ${XDG_CACHE_HOME:-$HOME/.cache}/dlock/etcd-protos-3.4.23
#
# Debian ships them in golang-etcd-server-dev (plus golang-github-gogo-protobuf-dev and
# golang-github-grpc-ecosystem-grpc-gateway-dev for the imports). Installing those pulls
# the Go toolchain (about 144 packages), so they are downloaded and unpacked instead
# (about 2 MB, 2 s). Does nothing if DIR already has them.
set -euo pipefail

dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/dlock/etcd-protos-3.4.23}"
marker="$dir/etcd/etcdserver/etcdserverpb/rpc.proto"
[[ -f "$marker" ]] && exit 0

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"  # apt-get download writes as _apt where it can
debs=(golang-etcd-server-dev golang-github-gogo-protobuf-dev golang-github-grpc-ecosystem-grpc-gateway-dev)
if ! (cd "$work" && apt-get download -qq "${debs[@]}" 2>/dev/null); then
  # No package lists yet (a fresh machine whose packages were all present): fetch them once.
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  (cd "$work" && apt-get download -qq "${debs[@]}" 2>/dev/null)
fi
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/x"; done
src="$work/x/usr/share/gocode/src"
mkdir -p "$dir.tmp"
# The import paths rpc.proto uses: etcd/..., gogoproto/..., google/api/...
cp -r "$src/go.etcd.io/etcd" "$dir.tmp/"
cp -r "$src/github.com/gogo/protobuf/gogoproto" "$dir.tmp/"
cp -r "$src/github.com/grpc-ecosystem/grpc-gateway/third_party/googleapis/google" "$dir.tmp/"
find "$dir.tmp" -type f ! -name '*.proto' -delete
rm -rf "$dir"
mv "$dir.tmp" "$dir"
[[ -f "$marker" ]] || { echo "etcd-protos.sh: $marker missing after unpacking" >&2; exit 1; }
echo "etcd-protos.sh: etcd's .proto files are in $dir"
