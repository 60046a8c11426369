import FoundationEssentials
import Protocol

/// The admin view of accounts: list, show, unlock, per-account device policy, deactivation.
struct AccountAdmin: Sendable {
    let directory: any AccountAdministration

    func list(limit: Int?) async throws -> AdminAccountsList.Result {
        let limit = limit ?? 100
        guard (1...1000).contains(limit) else { throw InvalidParameter("Parameter 'limit' must be from 1 to 1000.", field: "limit") }
        return AdminAccountsList.Result(accounts: try await directory.accounts(limit: limit))
    }

    /// What an admin's selector may mean: an id, an email address, or a phone number in any
    /// format libphonenumber reads — tried in that order.
    static func keys(_ selector: String) throws(PhoneNumber.LibraryUnavailable) -> [AccountKey] {
        var keys: [AccountKey] = [.id(selector)]
        if selector.contains("@"), let email = try? Registration.normalizeEmail(selector) { keys.append(.email(email)) }
        if let phone = try PhoneNumber.parseIfNumber(selector, region: nil) { keys.append(.phone(phone.e164)) }
        return keys
    }

    func show(_ selector: String) async throws -> AccountRecord {
        try await directory.account(Self.keys(selector), selector: selector)
    }

    func unlock(_ selector: String) async throws -> AccountRecord {
        try await directory.unlock(Self.keys(selector), selector: selector)
    }

    func set(_ params: AdminAccountsSet.Params) async throws -> AccountRecord {
        if let limit = params.deviceLimit, !(1...1000).contains(limit) {
            throw InvalidParameter("Parameter 'device_limit' must be from 1 to 1000.", field: "device_limit")
        }
        var policy: Config.DevicePolicy?
        if let name = params.devicePolicy {
            guard let known = Config.DevicePolicy(rawValue: name) else {
                throw InvalidParameter("Parameter 'device_policy' must be deny or replace_oldest.", field: "device_policy")
            }
            policy = known
        }
        return try await directory.setDevicePolicy(Self.keys(params.account), selector: params.account, limit: params.deviceLimit, policy: policy)
    }

    func setE2EE(_ params: AdminAccountsE2EE.Params) async throws -> AccountRecord {
        try await directory.setE2EE(Self.keys(params.account), selector: params.account, mode: params.e2ee)
    }

    func deactivate(_ selector: String) async throws -> AccountRecord {
        try await directory.deactivate(Self.keys(selector), selector: selector)
    }
}
