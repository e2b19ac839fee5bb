#!/usr/bin/env bash
# Installs dlock from a build tree (or unpacks its Debian package) into a
# throw-away root and builds examples/basic.cpp against it from outside the
# tree, the three ways a user would: find_package (shared and static) and
# pkg-config (as installed, without --define-prefix: dlock.pc finds its
# prefix from where it is). Runs each program on a file:// lock directory.
# Checks the tool's man page and bash completion are where man and bash
# look for them.
# Usage: consume.sh install|deb SOURCE_DIR BUILD_DIR
set -euo pipefail
mode=$1 src=$2 build=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-consume-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "consume.sh: $*" >&2; exit 1; }
example=$src/examples/basic.cpp

case $mode in
  install)
    cmake --install "$build" --prefix "$work/prefix" >/dev/null
    prefix=$work/prefix
    ;;
  deb)
    (cd "$build" && cpack -G DEB -B "$work/package" >/dev/null) || fail "cpack -G DEB failed"
    deb=$(ls "$work"/package/*.deb)
    # The package declares what it needs at run time: the store client libraries.
    depends=$(dpkg-deb -f "$deb" Depends)
    echo "Depends: $depends"
    for lib in libhiredis libzookeeper-mt libsqlite3 libpq5 libmariadb3 libgrpc++; do
      [[ $depends == *"$lib"* ]] || fail "the package does not depend on $lib"
    done
    contents=$(dpkg-deb -c "$deb")
    [[ $contents == *" ./usr/bin/dlock"* ]] || fail "the package has no /usr/bin/dlock"
    [[ $contents == *" ./usr/share/man/man1/dlock.1"* ]] || fail "the package has no dlock(1)"
    [[ $contents == *" ./usr/share/bash-completion/completions/dlock"* ]] ||
      fail "the package has no bash completion for dlock"
    dpkg -x "$deb" "$work/root"   # a throw-away root; the machine's packages are untouched
    prefix=$work/root/usr
    ;;
  *) fail "usage: consume.sh install|deb SOURCE_DIR BUILD_DIR" ;;
esac

libdir=$(dirname "$(find "$prefix" -name 'libdlock.so.*.*.*' | head -1)")
[[ -d $libdir ]] || fail "no libdlock.so installed under $prefix"
lockdir=$work/locks

expect_runs() {  # program: it must take the lock and print its fencing token
  local out
  out=$(LD_LIBRARY_PATH=$libdir "$1" "file://$lockdir") || fail "$1 failed"
  [[ $out == "holding stock:1001 with fencing token "* ]] || fail "$1 printed: $out"
  echo "$(basename "$1"): $out"
}

# The library exports the public API only: nothing of dlock::detail, nothing
# of the store client libraries.
leaked=$(nm -DC --defined-only "$libdir"/libdlock.so.*.*.* | awk '{ $1 = ""; $2 = ""; print }' |
         grep -v '^  \(dlock::\|typeinfo for dlock::\|typeinfo name for dlock::\|vtable for dlock::\)' |
         grep -v '^  [^(]* std::.*dlock::' | grep -v '^  dlock::detail' || true)
[[ -z $leaked ]] || fail "libdlock.so exports more than dlock's public API: $(echo "$leaked" | head -5)"
detail=$(nm -DC --defined-only "$libdir"/libdlock.so.*.*.* | awk '$3 ~ /^dlock::detail::/')
[[ -z $detail ]] || fail "libdlock.so exports dlock::detail symbols: $(echo "$detail" | head -3)"
soname=$(objdump -p "$libdir"/libdlock.so.*.*.* | awk '/SONAME/ { print $2 }')
[[ $soname =~ ^libdlock\.so\.[0-9]+\.[0-9]+$ ]] || fail "unexpected SONAME '$soname'"

# 1. CMake find_package, shared and static.
cmake -S "$src/tests/install/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
      -DDLOCK_EXAMPLE="$example" -DDLOCK_COMPONENTS="file;redis;zookeeper;sqlite;postgres;mysql;etcd" >/dev/null
cmake --build "$work/cmake" -j 2 >/dev/null
expect_runs "$work/cmake/basic_shared"
expect_runs "$work/cmake/basic_static"
needed_static=$(readelf -d "$work/cmake/basic_static") needed_shared=$(readelf -d "$work/cmake/basic_shared")
[[ $needed_static != *libdlock* ]] || fail "basic_static needs libdlock.so"
[[ $needed_shared == *"$soname"* ]] || fail "basic_shared does not load $soname"

# A backend the build lacks is refused by name.
if out=$(cmake -S "$src/tests/install/consumer" -B "$work/cmake-missing" -DCMAKE_PREFIX_PATH="$prefix" \
         -DDLOCK_EXAMPLE="$example" -DDLOCK_COMPONENTS="consul" 2>&1); then
  fail "find_package(dlock COMPONENTS consul) succeeded"
fi
[[ $out == *"without the 'consul' backend"* ]] || fail "a missing component's message does not name it: $out"

# 2. pkg-config, as a user calls it: the tree was installed (or the package
# unpacked) elsewhere than the prefix it was configured with, and dlock.pc
# must point into this tree anyway, without --define-prefix.
export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --exists dlock || fail "pkg-config does not find dlock.pc"
version=$(sed -n 's/^project(dlock VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ $(pkg-config --modversion dlock) == "$version" ]] ||
  fail "dlock.pc has version $(pkg-config --modversion dlock), the project $version"
[[ $(LD_LIBRARY_PATH=$libdir "$prefix/bin/dlock" --version) == "dlock $version" ]] ||
  fail "dlock --version says $("$prefix/bin/dlock" --version), the project $version"
real_prefix=$(cd "$prefix" && pwd -P)
for variable in includedir libdir; do
  path=$(pkg-config --variable=$variable dlock)
  [[ -d $path && $(cd "$path" && pwd -P) == "$real_prefix"/* ]] ||
    fail "dlock.pc's $variable is outside the installed tree: $path (tree: $prefix)"
  [[ " $(pkg-config --cflags --libs dlock) " == *" -"[IL]"$path "* ]] ||
    fail "pkg-config --cflags --libs dlock does not use its $variable $path"
done
static_libs=$(pkg-config --static --libs dlock)
[[ $static_libs == *-lhiredis* && $static_libs == *-lzookeeper_mt* && $static_libs == *-lpq* &&
   $static_libs == *-lmariadb* && $static_libs == *-lgrpc++* ]] ||
  fail "pkg-config --static --libs dlock does not name the store clients: $static_libs"
# shellcheck disable=SC2046
g++ -o "$work/basic_pc" "$example" $(pkg-config --cflags --libs dlock)
expect_runs "$work/basic_pc"

# 3. The tool's man page and bash completion, where man and bash-completion
# look under the prefix.
page=$prefix/share/man/man1/dlock.1
[[ -s $page ]] || fail "no man page at $page"
warnings=$(groff -man -ww -z -k "$page" 2>&1) || fail "groff could not read dlock.1"
[[ -z $warnings ]] || fail "dlock.1 has roff warnings: $warnings"
text=$(MANWIDTH=200 man -l "$page" 2>/dev/null)
for part in "dlock run" "dlock status" "dlock demo" "dlock bench" "EXIT STATUS" ENVIRONMENT EXAMPLES \
            --backend --lease --quiet "dlock $version"; do
  [[ $text == *"$part"* ]] || fail "dlock(1) does not mention '$part'"
done
completion=$prefix/share/bash-completion/completions/dlock
[[ -s $completion ]] || fail "no bash completion at $completion"
completed=$(bash -c 'source "$1"; COMP_WORDS=(dlock run --le); COMP_CWORD=2; _dlock; echo "${COMPREPLY[*]}"' _ "$completion")
[[ $completed == --lease ]] || fail "the completion of 'dlock run --le' is '$completed'"
echo "consume.sh $mode: ok"
