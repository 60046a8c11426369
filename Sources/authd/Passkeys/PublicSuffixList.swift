import CPSL

/// The public suffix list through libpsl (the only file that calls it): which domains are
/// suffixes under which anyone may register names (`com`, `co.uk`, `github.io`), with the list's
/// wildcard (`*.ck`) and exception (`!www.ck`) rules and the implicit `*` that makes every
/// unlisted single label a suffix.
final class PublicSuffixList: @unchecked Sendable {
    // Sendable: libpsl never changes a context after loading it, and its lookups are
    // thread-safe (libpsl(3)); the handle is freed only in deinit.
    private let context: OpaquePointer

    private init(context: OpaquePointer) { self.context = context }
    deinit { psl_free(context) }

    /// The newest list on this machine, read once: `psl_latest` takes the newer of the
    /// distribution's file (`/usr/share/publicsuffix/public_suffix_list.dafsa`, Debian package
    /// `publicsuffix`) and the copy built into libpsl. nil only when libpsl has neither.
    static let latest: PublicSuffixList? = psl_latest(nil).map(PublicSuffixList.init(context:))

    /// Whether `domain` is a public suffix, by the ICANN and the private rules alike.
    /// `domain` is lower case, with IDN labels in their `xn--` form (what `PasskeyScope.isDomain`
    /// accepts): libpsl holds each internationalised rule both in Unicode and in ACE form.
    func isPublicSuffix(_ domain: String) -> Bool {
        psl_is_public_suffix(context, domain) == 1
    }
}
