import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayWire
import Testing

@testable import RingRelayServer

/// A sealed call carries no plaintext about the caller, and its boxes go only to the callee's
/// own `apns_alert` bindings (issue 18).
@Suite struct SealedCallTests {
    @Test func sealedCallsRefusePlaintextAndForeignBoxes() async throws {
        try await LiveCallTests.withWorld { world in
            let key = world.key
            let alert = try await world.client.createBinding(
                #"{"identity":"bob","type":"apns_alert","token":"\#(String(repeating: "ab", count: 32))","publicKey":"\#(IdentityKeysTests.publicKey())"}"#,
                token: key)
            let fcm = try await world.client.createBinding(#"{"identity":"bob","type":"fcm","token":"bob-fcm"}"#, token: key)
            let carols = try await world.client.createBinding(
                #"{"identity":"carol","type":"apns_alert","token":"\#(String(repeating: "cd", count: 32))"}"#, token: key)
            func sealed(_ bindingID: String, extra: String = "") -> String {
                #"{"to":"bob"\#(extra),"sealed":[{"bindingId":"\#(bindingID)","box":"AAAA"}]}"#
            }
            let refusals: [(String, String)] = [
                (sealed(alert.id, extra: #","displayName":"Alice""#), "displayName"),
                (sealed(alert.id, extra: #","metadata":{"room":"r1"}"#), "metadata"),
                (sealed(fcm.id), "sealed[0].bindingId"),
                (sealed(carols.id), "sealed[0].bindingId"),
                (sealed("bnd_00000000000000000000000000"), "sealed[0].bindingId"),
            ]
            for (body, field) in refusals {
                let response = try await world.client.send(.post, "/v1/calls", token: world.alice, json: body)
                #expect(response.status == .unprocessableContent, "\(body)")
                let error = try response.decode(ErrorBody.self).error
                #expect(error.code == "invalid_field")
                #expect(error.message.contains("'\(field)'"), "\(error.message)")
            }
            // Nothing was created by the refusals: the history is empty.
            #expect(try await world.client.send(.get, "/v1/calls", token: key).decode(CallList.self).data.isEmpty)

            // A box for the callee's own alert binding, and nothing in clear: the call is placed.
            let placed = try await world.client.send(.post, "/v1/calls", token: world.alice, json: sealed(alert.id))
            #expect(placed.status == .created, "\(String(buffer: placed.body))")
            let call = try placed.decode(CallResource.self)
            #expect(call.displayName == nil)
            #expect(call.metadata == nil)
        }
    }
}
