import CPAM

// pam_authd.so: the PAM module, a client of the system authd (pam_authd(8)). libpam finds these
// functions by name with dlsym; each reads its line's arguments and hands over to PAMRequest.
// The library is linked with the Swift runtime inside it (-static-stdlib) and marked never to be
// unloaded (-z nodelete): sudo or login need no Swift installation, and pam_end's dlclose cannot
// pull the runtime out from under its own thread-local state.

/// The arguments of the module's line in the stack.
private func arguments(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> [String] {
    guard let argv, argc > 0 else { return [] }
    return (0..<Int(argc)).compactMap { argv[$0].map { String(cString: $0) } }
}

/// `auth`: proves the user through authd, asking the questions through the PAM conversation.
@_cdecl("pam_sm_authenticate")
public func pamAuthenticate(_ handle: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
    guard let handle else { return PAM_SERVICE_ERR }
    return PAMRequest(handle: handle, flags: flags, options: ModuleOptions(arguments: arguments(argc, argv))).authenticate()
}

/// `auth` credentials: authd issues none that PAM could set; nothing to do.
@_cdecl("pam_sm_setcred")
public func pamSetCredentials(_ handle: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
    PAM_SUCCESS
}

/// `account`: a deactivated linked account is expired, a locked one is denied until it lifts.
@_cdecl("pam_sm_acct_mgmt")
public func pamAccountManagement(_ handle: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
    guard let handle else { return PAM_SERVICE_ERR }
    return PAMRequest(handle: handle, flags: flags, options: ModuleOptions(arguments: arguments(argc, argv))).checkAccount()
}

/// `session`: authd keeps no per-login session of its own; nothing to open.
@_cdecl("pam_sm_open_session")
public func pamOpenSession(_ handle: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
    PAM_SUCCESS
}

/// `session`: nothing was opened, nothing to close.
@_cdecl("pam_sm_close_session")
public func pamCloseSession(_ handle: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
    PAM_SUCCESS
}
