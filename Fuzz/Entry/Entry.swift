/// One C entry point per fuzz target, each with libFuzzer's signature: Fuzz/build.sh links
/// each binary with LLVMFuzzerTestOneInput defined as one of these.
@_cdecl("authd_fuzz_wire") func fuzzWire(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzz(.wire, data, size) }
@_cdecl("authd_fuzz_strict_json") func fuzzStrictJSON(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzz(.strictJSON, data, size) }
@_cdecl("authd_fuzz_config") func fuzzConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzz(.config, data, size) }
@_cdecl("authd_fuzz_smartcard") func fuzzSmartCard(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzz(.smartcard, data, size) }
@_cdecl("authd_fuzz_webauthn") func fuzzWebAuthn(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzz(.webauthn, data, size) }
@_cdecl("authd_fuzz_jose") func fuzzJOSE(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzz(.jose, data, size) }
@_cdecl("authd_fuzz_phone") func fuzzPhone(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzz(.phone, data, size) }

private func fuzz(_ target: FuzzTarget, _ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    target.run(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
