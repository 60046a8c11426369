// swift-tools-version:6.0
//
// authd — the authentication daemon. No package dependencies: the toolchain plus
// system C libraries, each behind one module-map target (DESIGN.md §1).
import PackageDescription

// Release builds put each function of authd's own code in a section of its own, as most of the
// static Swift runtime and Foundation already are: the linker then drops what nothing calls,
// keeps one copy of each helper several files emit, and lays functions out as the authd target
// below says.
let functionSections: [SwiftSetting] = [.unsafeFlags(["-Xfrontend", "-function-sections"], .when(configuration: .release))]

let package = Package(
    name: "authd",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Protocol", targets: ["Protocol"]),
        .library(name: "AuthdClient", targets: ["AuthdClient"]),
        .executable(name: "authd", targets: ["authd"]),
        .executable(name: "authctl", targets: ["authctl"]),
        .executable(name: "authd-http", targets: ["authd-http"]),
        .executable(name: "authd-vcard", targets: ["authd-vcard"]),
        .executable(name: "authd-webeid", targets: ["authd-webeid"]),
        // libpam_authd.so, installed as pam_authd.so in the multiarch security directory.
        .library(name: "pam_authd", type: .dynamic, targets: ["pam_authd"]),
        // libauthd-phonenumber.so: libphonenumber behind a C shim, which authd opens at the first
        // phone number (PhoneNumber.swift), so a daemon that sees none maps none of it.
        .library(name: "authd-phonenumber", type: .dynamic, targets: ["CPhoneNumber"]),
    ],
    targets: [
        // System libraries: one module map (+ shim.h for macros and varargs) each.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSSL", pkgConfig: "libssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CArgon2", pkgConfig: "libargon2", providers: [.apt(["libargon2-dev"])]),
        .systemLibrary(name: "CEAC", pkgConfig: "libeac", providers: [.apt(["libeac-dev"])]),
        .systemLibrary(name: "CCBOR", pkgConfig: "libcbor", providers: [.apt(["libcbor-dev"])]),
        .systemLibrary(name: "CPSL", pkgConfig: "libpsl", providers: [.apt(["libpsl-dev"])]),
        .systemLibrary(name: "CPAM", pkgConfig: "pam", providers: [.apt(["libpam0g-dev"])]),
        // libpq: its header only; authd opens the library when a store needs it (shim.h).
        .systemLibrary(name: "CPostgreSQL"),
        // libphonenumber is C++: a tiny C shim keeps its types out of Swift. CPhoneNumber is the
        // shim, built only into libauthd-phonenumber.so; CPhoneNumberAPI is its header alone,
        // which authd imports.
        .systemLibrary(name: "CPhoneNumberAPI"),
        .target(name: "CPhoneNumber", linkerSettings: [
            .linkedLibrary("phonenumber"),
            // A C++ library for a process that carries its own Swift runtime: no Swift start-up
            // object, so nothing refers to the runtime, and the static runtime (from which
            // nothing is then taken) rather than the toolchain's libswiftCore.so and its rpath.
            .unsafeFlags(["-nostartfiles", "-static-stdlib"]),
        ]),
        // pcsclite's pkg-config flags include -pthread, which SwiftPM refuses with a warning on
        // every build: its headers are reached through two forwarders instead (see include/).
        .target(name: "CPCSC", linkerSettings: [.linkedLibrary("pcsclite")]),

        // Linux calls the Glibc overlay hides behind _GNU_SOURCE (accept4, SO_PEERCRED, prctl).
        .target(name: "CLinux"),

        // Wire types shared by authd, authctl and any Swift client. No I/O, no C.
        .target(name: "Protocol", swiftSettings: functionSections),

        // The client side of the socket, for authctl, the tests, the bench and pam_authd:
        // a line connection and a JSON-RPC client on it. FoundationEssentials and Glibc only, so
        // a PAM module linking it stays small.
        .target(name: "AuthdClient", dependencies: ["Protocol", "CLinux"], swiftSettings: functionSections),

        // libcrypto behind Swift types (random, digests, HKDF, AES-GCM, EC keys, X.509 reading and
        // issuing), shared by the daemon, the virtual card and SmartCard (PACE's MAC check). The
        // only code that calls libcrypto, apart from the buffers libeac's own API is written in;
        // and libssl's TLS 1.3 for the hub link (TLS.swift, the only file that calls SSL_*).
        .target(name: "OpenSSLCrypto", dependencies: ["COpenSSL", "CSSL"], swiftSettings: functionSections),

        // ISO 7816 APDUs and TLV, the Estonian ID card's command table, and PACE with secure
        // messaging over OpenPACE (whose API speaks OpenSSL's BUF_MEM, reached through CEAC):
        // shared by the daemon and the virtual card. No I/O.
        .target(name: "SmartCard", dependencies: ["CEAC", "OpenSSLCrypto"], swiftSettings: functionSections),
        // The JOSE profile of end-to-end encrypted sync (JWE ECDH-ES+A256KW/A256GCM, signed
        // envelopes, published device keys), on OpenSSLCrypto: authd's, and the bench's light devices'.
        .target(name: "JOSE", dependencies: ["Protocol", "OpenSSLCrypto"], swiftSettings: functionSections),

        .executableTarget(
            name: "authd",
            dependencies: ["Protocol", "AuthdClient", "SmartCard", "OpenSSLCrypto", "JOSE", "CSQLite", "CSystemd", "CLinux", "CArgon2", "CPhoneNumberAPI", "CPCSC", "CCBOR", "CPSL", "CPostgreSQL"],
            exclude: ["link-order.txt", "link-layout.ld"],
            swiftSettings: functionSections,
            // A release build carries its Swift runtime and Foundation inside, as the PAM module
            // does: the daemon maps about 3 MB fewer library pages at rest (`make bench`, idle
            // RSS) and calls the runtime without going through the dynamic linker's tables. It is
            // linked by the toolchain's lld, which packs its 51,000 relative relocations into
            // 10 KB (DT_RELR, glibc 2.36) rather than 1.2 MB the loader reads at every start, and
            // it exports no symbols (nothing looks any up; the 8,000 exports were 0.4 MB more).
            // The functions a hub runs come first, in link-order.txt's order (`make link-order`
            // writes it from a profile; link-layout.ld adds the ones without a name): the kernel
            // maps code in 64 KiB steps around each page that runs, so the resident code is then
            // closer to the size of the code that runs. A function the list lacks is laid out as
            // before.
            linkerSettings: [
                .linkedLibrary("_FoundationCollections", .when(configuration: .release)),
                .linkedLibrary("_FoundationCShims", .when(configuration: .release)),
                .linkedLibrary("swiftSynchronization", .when(configuration: .release)),
                .unsafeFlags(["-static-stdlib", "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                              "-Xlinker", "--no-export-dynamic",
                              "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Sources/authd/link-order.txt",
                              "-Xlinker", "--no-warn-symbol-ordering",
                              "-Xlinker", "-T", "-Xlinker", "\(Context.packageDirectory)/Sources/authd/link-layout.ld"], .when(configuration: .release)),
            ]
        ),
        // The PAM module: a client of the system authd like authctl, on the same client library.
        // The Swift runtime is linked in (a sudo or login process has none), the library is
        // never unloaded (dlclose would tear the runtime's thread-local state out from under it),
        // and only the pam_sm_* functions are exported.
        .target(
            name: "pam_authd",
            dependencies: ["AuthdClient", "Protocol", "CPAM"],
            exclude: ["exports.map"],
            linkerSettings: [
                // What the static FoundationEssentials and the client library's Mutex need, which
                // -static-stdlib does not name by itself.
                .linkedLibrary("_FoundationCollections"), .linkedLibrary("_FoundationCShims"), .linkedLibrary("swiftSynchronization"),
                // Linked by the toolchain's lld, as authd is: GNU ld warned at every release build
                // about a mktemp inside the static FoundationEssentials that nothing here calls.
                .unsafeFlags([
                "-static-stdlib", "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "nodelete",
                "-Xlinker", "--version-script=\(Context.packageDirectory)/Sources/pam_authd/exports.map",
            ])]
        ),
        .executableTarget(
            name: "authctl",
            dependencies: ["Protocol", "AuthdClient"]
        ),

        // One HTTP request per run, for the daemon (SMS gateway, OpenID discovery, JWKS, token
        // endpoint, remote.fetch): URLSession and TLS in a short-lived process, never in authd's.
        .executableTarget(name: "authd-http", dependencies: ["Protocol", "CLinux"]),

        // The Web eID native messaging host a browser starts (eu.webeid): a client of authd
        // like authctl, on the same client library.
        .executableTarget(name: "authd-webeid", dependencies: ["Protocol", "AuthdClient"]),

        // A simulator of the ID card behind vsmartcard's vpcd reader driver, for development
        // and tests, and the generator of its test CA and card profiles.
        .executableTarget(name: "authd-vcard", dependencies: ["Protocol", "SmartCard", "OpenSSLCrypto", "CLinux"]),

        .testTarget(name: "ProtocolTests", dependencies: ["Protocol"], exclude: ["Fixtures"]),
        // APDU and TLV parsing, and PACE with secure messaging, both roles in one process.
        .testTarget(name: "SmartCardTests", dependencies: ["SmartCard"]),
        // The client library against a peer on a socketpair: framing, ids, timeouts, refusals.
        .testTarget(name: "AuthdClientTests", dependencies: ["AuthdClient", "Protocol"]),
        .testTarget(name: "OpenSSLCryptoTests", dependencies: ["OpenSSLCrypto", "Protocol"]),
        .testTarget(name: "AuthdTests", dependencies: ["authd", "Protocol", "AuthdClient", "OpenSSLCrypto", "JOSE", "CLinux"]),
        // authctl's own logic with no daemon: help layout, "did you mean", prompts asked again, wording.
        .testTarget(name: "AuthctlTests", dependencies: ["authctl", "Protocol"]),
        // The Web eID host's framing, argument checks and one-command machine, with no browser or daemon.
        .testTarget(name: "WebEIDHostTests", dependencies: ["authd-webeid", "Protocol"]),
        // The fuzz targets (Fuzz/Harnesses) replaying their committed corpora; `make fuzz` runs the
        // same code under libFuzzer, built by Fuzz/build.sh outside SwiftPM.
        .testTarget(name: "FuzzTests", dependencies: ["authd", "Protocol", "SmartCard"], path: "Fuzz",
                    exclude: ["corpus", "Entry", "build.sh"]),
        .testTarget(name: "IntegrationTests", dependencies: ["Protocol", "AuthdClient", "CLinux"], exclude: ["Python", "Hosts"]),

        // `make bench`: drives a release build of the real daemon over its socket.
        .executableTarget(name: "authd-bench", dependencies: ["Protocol", "AuthdClient", "CLinux", "CArgon2", "CPCSC", "OpenSSLCrypto", "JOSE"], path: "Tests/Bench",
                          exclude: ["link-order.py"]),
    ],
    swiftLanguageModes: [.v6]
)
