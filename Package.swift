// swift-tools-version:6.0
//
// authd — the authentication daemon. No package dependencies: the toolchain plus
// system C libraries, each behind one module-map target (DESIGN.md §1).
import PackageDescription

let package = Package(
    name: "authd",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Protocol", targets: ["Protocol"]),
        .executable(name: "authd", targets: ["authd"]),
        .executable(name: "authctl", targets: ["authctl"]),
        .executable(name: "authd-sms-http", targets: ["authd-sms-http"]),
    ],
    targets: [
        // System libraries: one module map (+ shim.h for macros and varargs) each.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CArgon2", pkgConfig: "libargon2", providers: [.apt(["libargon2-dev"])]),
        // libphonenumber is C++: a tiny C shim keeps its types out of Swift.
        .target(name: "CPhoneNumber", linkerSettings: [.linkedLibrary("phonenumber")]),

        // Linux calls the Glibc overlay hides behind _GNU_SOURCE (accept4, SO_PEERCRED, prctl).
        .target(name: "CLinux"),

        // Wire types shared by authd, authctl and any Swift client. No I/O, no C.
        .target(name: "Protocol"),

        .executableTarget(
            name: "authd",
            dependencies: ["Protocol", "CSQLite", "COpenSSL", "CSystemd", "CLinux", "CArgon2", "CPhoneNumber"]
        ),
        .executableTarget(
            name: "authctl",
            dependencies: ["Protocol", "CLinux"]
        ),

        // The `[sms] backend = http` sender: URLSession in its own process, never in authd's.
        .executableTarget(name: "authd-sms-http"),

        .testTarget(name: "ProtocolTests", dependencies: ["Protocol"], exclude: ["Fixtures"]),
        .testTarget(name: "AuthdTests", dependencies: ["authd", "Protocol", "CLinux"]),
        .testTarget(name: "IntegrationTests", dependencies: ["Protocol", "CLinux"], exclude: ["Python"]),

        // `make bench`: drives a release build of the real daemon over its socket.
        .executableTarget(name: "authd-bench", dependencies: ["Protocol", "CLinux", "CArgon2"], path: "Tests/Bench"),
    ],
    swiftLanguageModes: [.v6]
)
