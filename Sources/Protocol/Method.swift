/// The protocol version `hello` reports. Bumped only for incompatible changes; additions
/// (new methods, new optional fields, new reasons) are announced through `features`.
public let protocolVersion = 1

/// A method the daemon serves: its wire name and its typed parameters and result.
///
/// The daemon's dispatch table and authctl's calls are both written against these types, so a
/// method's shape is defined once.
public protocol RPCMethod {
    associatedtype Params: Codable & Sendable
    associatedtype Result: Codable & Sendable
    /// The `noun.verb` method name on the wire.
    static var name: String { get }
}

/// Parameters of a method that takes none (`params` absent, `null` or `{}`).
public struct NoParams: Codable, Sendable, Equatable {
    public init() {}
}

/// A daemon → client notification: its wire name and typed params.
public protocol RPCNotification {
    associatedtype Params: Codable & Sendable
    static var name: String { get }
}
