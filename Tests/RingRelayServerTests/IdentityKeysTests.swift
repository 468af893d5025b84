import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayWire
import Testing

@testable import RingRelayServer

/// The key directory a caller seals invites with: an identity's active bindings that carry a
/// public key, for account keys and the account's devices; an identity without bindings in the
/// account, as another account's always is, is not found.
@Suite struct IdentityKeysTests {
    static func publicKey() -> String {
        P256.KeyAgreement.PrivateKey().publicKey.x963Representation.base64EncodedString()
    }

    @Test func aCallerFindsTheCalleesDeviceKeys() async throws {
        let server = try await TestServer.make()
        let adminToken = server.adminToken
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: adminToken).apiKey
            let phoneKey = Self.publicKey()
            let tabletKey = Self.publicKey()
            let phone = try await client.createBinding(
                #"{"identity":"bob","type":"apns_alert","token":"\#(String(repeating: "ab", count: 32))","deviceId":"b1","publicKey":"\#(phoneKey)"}"#, token: key)
            let tablet = try await client.createBinding(
                #"{"identity":"bob","type":"fcm","token":"bob-tablet","deviceId":"b2","publicKey":"\#(tabletKey)"}"#, token: key)
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(String(repeating: "cd", count: 32))"}"#, token: key)

            // A caller's device (another identity of the account) reads them.
            let alice = try await client.accessToken(identity: "alice", deviceID: "a1", key: key)
            let response = try await client.send(.get, "/v1/identities/bob/keys", token: alice)
            #expect(response.status == .ok)
            let list = try response.decode(DeviceKeyList.self)
            #expect(list.identity == "bob")
            // Only bindings with a key (the test clock registers them all at the same instant).
            let byBinding = Dictionary(uniqueKeysWithValues: list.data.map { ($0.bindingId, $0) })
            #expect(Set(byBinding.keys) == [phone.id, tablet.id])
            #expect(byBinding[phone.id]?.publicKey == phoneKey)
            #expect(byBinding[phone.id]?.deviceId == "b1")
            #expect(byBinding[phone.id]?.type == "apns_alert")
            #expect(byBinding[tablet.id]?.publicKey == tabletKey)
            #expect(byBinding[tablet.id]?.type == "fcm")
            #expect(try await client.send(.get, "/v1/identities/bob/keys", token: key).decode(DeviceKeyList.self) == list)

            // A deleted binding's key is gone from the directory at once.
            #expect(try await client.send(.delete, "/v1/bindings/\(tablet.id)", token: key).status == .noContent)
            #expect(try await client.send(.get, "/v1/identities/bob/keys", token: alice).decode(DeviceKeyList.self).data.map(\.bindingId) == [phone.id])

            // An identity of the account with bindings but no key: known, nothing to seal to.
            _ = try await client.createBinding(#"{"identity":"carol","type":"fcm","token":"carol-fcm"}"#, token: key)
            let carols = try await client.send(.get, "/v1/identities/carol/keys", token: alice)
            #expect(carols.status == .ok)
            #expect(try carols.decode(DeviceKeyList.self).data.isEmpty)

            // An identity with no binding in the caller's account is not found, and another
            // account's identity (with keys there) answers exactly the same: 404, both ways.
            let otherKey = try await client.createAccount("other", admin: adminToken).apiKey
            _ = try await client.createBinding(
                #"{"identity":"mallory","type":"fcm","token":"mallory-fcm","publicKey":"\#(Self.publicKey())"}"#, token: otherKey)
            let stranger = try await client.accessToken(identity: "mallory", deviceID: "m1", key: otherKey)
            #expect(try await client.send(.get, "/v1/identities/mallory/keys", token: stranger).decode(DeviceKeyList.self).data.count == 1)
            for (identity, token) in [("bob", stranger), ("mallory", alice), ("mallory", key), ("nobody", alice), ("nobody", key)] {
                let response = try await client.send(.get, "/v1/identities/\(identity)/keys", token: token)
                #expect(response.status == .notFound, "\(identity)")
                let error = try response.decode(ErrorBody.self).error
                #expect(error.code == "identity_not_found")
                #expect(error.message == "The identity '\(identity)' has no active binding in this account.")
            }

            // An identity that needs percent-encoding in the path is read decoded.
            _ = try await client.createBinding(
                #"{"identity":"bob smith","type":"fcm","token":"bs-token","publicKey":"\#(Self.publicKey())"}"#, token: key)
            #expect(try await client.send(.get, "/v1/identities/bob%20smith/keys", token: key).decode(DeviceKeyList.self).data.count == 1)

            // Bad and missing credentials, a bad identity.
            #expect(try await client.send(.get, "/v1/identities/bob/keys").status == .unauthorized)
            #expect(try await client.send(.get, "/v1/identities/bob/keys", token: adminToken).status == .forbidden)
            let bidi = try await client.send(.get, "/v1/identities/%E2%80%AEbob/keys", token: key)
            #expect(bidi.status == .unprocessableContent)
            #expect(bidi.errorCode == "invalid_parameter")
        }
    }
}
