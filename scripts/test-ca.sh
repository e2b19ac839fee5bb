#!/usr/bin/env bash
# Makes a throw-away certificate authority and the certificates the TLS tests need, with the
# openssl command-line tool (P-256 keys: about 50 ms in all).
#
#   scripts/test-ca.sh DIR    writes, in DIR (created if missing):
#     ca.pem, ca.key           a self-signed CA (valid 2 days), used by nothing but these tests
#     server.pem, server.key   a server certificate for 127.0.0.1 and localhost (subjectAltName),
#                              serverAuth, signed by the CA
#     client.pem, client.key   a client certificate (CN=dlock, the tests' database user), clientAuth,
#                              signed by the CA (mutual TLS)
#
# Idempotent: if every file is there already, nothing is made again. Two calls with two
# directories make two unrelated CAs (a test's "wrong CA"). Keys are readable by their owner
# only; a server that runs as another user (PostgreSQL under root) needs its own copy.
set -euo pipefail

dir="${1:-}"
[[ -n "$dir" ]] || { echo "usage: $0 DIR" >&2; exit 64; }
command -v openssl >/dev/null || { echo "test-ca.sh: no openssl (apt-get install openssl)" >&2; exit 1; }

files=(ca.pem ca.key server.pem server.key client.pem client.key)
complete=1
for f in "${files[@]}"; do [[ -s "$dir/$f" ]] || complete=0; done
((complete)) && exit 0

mkdir -p "$dir"
work="$(mktemp -d "$dir/.make.XXXXXX")"
trap 'rm -rf "$work"' EXIT
umask 077

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# sign NAME SUBJECT EXTENSIONS: NAME.key and NAME.pem, signed by the CA.
sign() {
  local name="$1" subject="$2" extensions="$3"
  key "$work/$name.key"
  openssl req -new -key "$work/$name.key" -subj "$subject" -out "$work/$name.csr"
  printf '%s\n' "$extensions" > "$work/$name.ext"
  openssl x509 -req -in "$work/$name.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
    -days 2 -sha256 -extfile "$work/$name.ext" -out "$work/$name.pem" 2>/dev/null
}

key "$work/ca.key"
openssl req -x509 -new -key "$work/ca.key" -subj "/CN=dlock test CA $(openssl rand -hex 4)" -days 2 -sha256 \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$work/ca.pem"
sign server "/CN=127.0.0.1" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost"
sign client "/CN=dlock" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"

# Certificates world-readable, keys the owner's only; moved in last, so a half-made set is
# never taken for a whole one.
chmod 644 "$work"/*.pem
for f in "${files[@]}"; do mv -f "$work/$f" "$dir/$f"; done
