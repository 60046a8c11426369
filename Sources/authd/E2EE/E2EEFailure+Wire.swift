import JOSE

/// An E2EE refusal answers a call like any other failure (its `rpcError`: code -32000, the reason).
extension E2EEFailure: WireErrorConvertible {}
