import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayAPNs
import RingRelayCore
import RingRelayFCM
import RingRelayTesting
import RingRelayWire
import Testing

@testable import RingRelayServer

/// A live server pointed at both simulators, with an account that has APNs and FCM credentials.
struct SimulatorWorld {
    let server: TestServer
    let client: any TestClientProtocol
    let apns: APNsSimulator
    let fcm: FCMSimulator
    let port: Int
    let key: String

    func binding(_ type: String, token: String, device: String?, publicKey: String? = nil, identity: String = "bob") async throws
        -> BindingResource
    {
        var body = #"{"identity":"\#(identity)","type":"\#(type)","token":"\#(token)""#
        if let device { body += #","deviceId":"\#(device)""# }
        if let publicKey { body += #","publicKey":"\#(publicKey)""# }
        return try await client.createBinding(body + "}", token: key)
    }

    func call(_ body: String) async throws -> CallResource {
        let response = try await client.send(.post, "/v1/calls", token: key, json: body)
        #expect(response.status == .created, "\(String(buffer: response.body))")
        return try response.decode(CallResource.self)
    }

    /// The call's record once it has ended and `notices` missed-call deliveries have answers.
    func record(_ callID: String, notices: Int) async throws -> CallResource {
        var record = try await client.send(.get, "/v1/calls/\(callID)", token: key).decode(CallResource.self)
        for _ in 0..<300 {
            let answered = (record.deliveries ?? []).filter { $0.kind == MissedCallNotices.kind && $0.outcome != "pending" }
            if record.state != "ringing", answered.count >= notices { break }
            try await Task.sleep(for: .milliseconds(50))
            record = try await client.send(.get, "/v1/calls/\(callID)", token: key).decode(CallResource.self)
        }
        return record
    }

    /// Alert pushes the APNs simulator received (rings of plain calls are VoIP pushes).
    var alerts: [APNsSimulator.ReceivedPush] { apns.received.filter { $0.headers["apns-push-type"] == "alert" } }
    /// FCM messages that show a notification (rings are data-only).
    var notifications: [FCMSimulator.ReceivedMessage] { fcm.received.filter { !$0.notification.isEmpty } }

    static func with(_ body: @Sendable (SimulatorWorld) async throws -> Void) async throws {
        let apns = try APNsSimulator()
        try await apns.start()
        let fcm = try FCMSimulator()
        try await fcm.start()
        var server = try await TestServer.make(start: Date())
        try server.pushThrough(apns)
        try server.pushThrough(fcm)
        // Devices ack at once; a long window keeps a starved test process from missing it.
        server.configuration.liveFallback = .seconds(10)
        let configured = server
        let apnsCredential = TestServer.apnsCredential(knownTo: apns)
        try await configured.withClient(.live) { client in
            let key = try await client.createAccount("acme", admin: configured.adminToken).apiKey
            #expect(try await client.send(.put, "/v1/credentials/apns", token: key, json: apnsCredential).status == .ok)
            let serviceAccount = try fcm.makeServiceAccount(projectID: FCMTestPushTests.projectID, privateKeyPEM: FCMTestPushTests.sharedKeyPEM)
            #expect(
                try await client.send(.put, "/v1/credentials/fcm", token: key, json: try FCMTestPushTests.credentialBody(serviceAccount)).status
                    == .ok)
            try await body(SimulatorWorld(server: configured, client: client, apns: apns, fcm: fcm, port: try #require(client.port), key: key))
        }
        try await fcm.shutdown()
        try await apns.shutdown()
    }
}
