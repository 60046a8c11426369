#!/bin/sh
# Builds one libFuzzer binary per fuzz target (Fuzz/Harnesses/FuzzTarget.swift) into
# $OUT (default .build/fuzz/bin), with swiftc directly rather than SwiftPM: the package's
# modules are compiled again with -sanitize=fuzzer,address, so the normal build never sees the
# flags. authd is an executable target, so its sources (without main.swift) are compiled as a
# library with -enable-testing and the harnesses reach its internal parsers with
# @testable import, as the unit tests do; nothing is moved or made public for the fuzzers.
# The harness module is compiled once; each binary is one link that points libFuzzer's entry
# point at its target's function (authd_fuzz_<target>, Fuzz/Entry/Entry.swift).
#
# Usage: Fuzz/build.sh [TARGET...]   (default: every target)
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${FUZZ_BUILD:-$ROOT/.build/fuzz}
SWIFTC=${SWIFTC:-$(command -v swiftc)}
CLANG=${CLANG:-$(dirname "$SWIFTC")/clang}
SAN="-sanitize=fuzzer,address"
# Whole-module and optimised: one frontend per module builds fastest on a small machine, and
# the fuzzers run several times faster than unoptimised.
SWIFTFLAGS="-swift-version 6 -O -wmo -g -parse-as-library $SAN -I $BUILD/modules"
TARGETS=${*:-wire strict-json config smartcard webauthn jose phone}

mkdir -p "$BUILD/modules" "$BUILD/lib" "$BUILD/bin" "$BUILD/modulemaps"
cd "$ROOT"

# The system-library targets bring their own module maps; the C targets get one like SwiftPM's.
CMODULES=""
for module in CSQLite COpenSSL CSSL CSystemd CArgon2 CEAC CCBOR CPSL CPhoneNumberAPI; do
    CMODULES="$CMODULES -Xcc -fmodule-map-file=$ROOT/Sources/$module/module.modulemap"
done
for module in CLinux CPCSC; do
    mkdir -p "$BUILD/modulemaps/$module"
    printf 'module %s {\n    umbrella header "%s"\n    export *\n}\n' "$module" "$ROOT/Sources/$module/include/$module.h" \
        > "$BUILD/modulemaps/$module/module.modulemap"
    CMODULES="$CMODULES -Xcc -fmodule-map-file=$BUILD/modulemaps/$module/module.modulemap -Xcc -I$ROOT/Sources/$module/include"
done

# stale OUTPUT INPUT...: true when OUTPUT is missing or older than one of the inputs.
stale() {
    output=$1; shift
    [ -e "$output" ] || return 0
    [ -n "$(find "$@" -newer "$output" -print -quit)" ]
}

# swift_module NAME SOURCES...: a static library and its module, with the C modules visible.
# Built again when a module before it was: -O inlines code across modules.
UPSTREAM=""
swift_module() {
    name=$1; shift
    library="$BUILD/lib/lib$name.a"
    upstream=$UPSTREAM
    UPSTREAM="$UPSTREAM $library"
    stale "$library" "$@" $upstream "$0" || return 0
    echo "fuzz: compiling $name"
    # An existing archive would keep its old members beside the new ones, and the linker
    # takes the first definition it finds.
    rm -f "$library"
    "$SWIFTC" $SWIFTFLAGS $CMODULES -enable-testing -module-name "$name" -emit-library -static \
        -emit-module -emit-module-path "$BUILD/modules/$name.swiftmodule" \
        -o "$library" "$@"
}

c_object() {
    name=$1; source=$2; shift 2
    stale "$BUILD/lib/$name.o" "$source" "$0" || return 0
    echo "fuzz: compiling $name"
    "$CLANG" -c -g -O1 -fsanitize=address,fuzzer-no-link -fPIC -I"$ROOT/Sources/$name/include" "$@" -o "$BUILD/lib/$name.o" "$source"
}

c_object CLinux Sources/CLinux/shim.c
c_object CPCSC Sources/CPCSC/shim.c
# libphonenumber's shim is a library authd opens at the first phone number, from the directory
# of the executable: built there, for the fuzzers as for authd.
PHONE="$BUILD/bin/libauthd-phonenumber.so"
if stale "$PHONE" Sources/CPhoneNumber/shim.cpp Sources/CPhoneNumber/include/CPhoneNumber.h "$0"; then
    echo "fuzz: compiling $PHONE"
    "$CLANG" -shared -g -O1 -std=c++17 -fsanitize=address,fuzzer-no-link -fPIC -I"$ROOT/Sources/CPhoneNumber/include" \
        -o "$PHONE" Sources/CPhoneNumber/shim.cpp -lphonenumber -lstdc++
fi

swift_module Protocol Sources/Protocol/*.swift
swift_module AuthdClient Sources/AuthdClient/*.swift
swift_module OpenSSLCrypto Sources/OpenSSLCrypto/*.swift
swift_module SmartCard Sources/SmartCard/*.swift
swift_module authd $(find Sources/authd -name '*.swift' ! -path Sources/authd/main.swift | sort)
swift_module FuzzHarnesses Fuzz/Harnesses/*.swift Fuzz/Entry/Entry.swift

# The Swift libraries each module imports (Foundation, Synchronization…) are recorded in its
# objects; the driver reads them from objects it is given, not from archives, so they are
# extracted here.
LIBRARIES="FuzzHarnesses authd SmartCard OpenSSLCrypto AuthdClient Protocol"
AUTOLINK=$(for library in $LIBRARIES; do "$(dirname "$SWIFTC")/swift-autolink-extract" "$BUILD/lib/lib$library.a" -o -; done | sort -u)

for target in $TARGETS; do
    symbol=authd_fuzz_$(echo "$target" | tr - _)
    binary="$BUILD/bin/fuzz-$target"
    stale "$binary" "$BUILD/lib" || continue
    echo "fuzz: linking $binary"
    "$SWIFTC" $SAN -use-ld=lld -o "$binary" \
        -Xlinker --defsym=LLVMFuzzerTestOneInput=$symbol -Xlinker -u -Xlinker $symbol \
        -L "$BUILD/lib" $(for library in $LIBRARIES; do echo "-l$library"; done) $AUTOLINK \
        "$BUILD/lib/CLinux.o" "$BUILD/lib/CPCSC.o" \
        -lsqlite3 -lssl -lcrypto -lsystemd -largon2 -leac -lcbor -lpsl -lpcsclite -lstdc++
done
