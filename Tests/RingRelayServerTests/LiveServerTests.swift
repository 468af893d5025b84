import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import RingRelayWire
import Testing

/// The application on a real port, over a real HTTP connection.
@Suite struct LiveServerTests {
    @Test func bindingRoundTripOverARealSocket() async throws {
        let server = try await TestServer.make()
        try await server.withClient(.live) { client in
            let key = try await client.createAccount("live", admin: server.adminToken).apiKey
            let port = try #require(client.port)
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/bindings")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(key)")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: #"{"identity":"bob","type":"fcm","token":"live-token"}"#))
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            #expect(response.status.code == 201)
            #expect(response.headers.first(name: "Server") == "RingRelay")
            let list = try await client.send(.get, "/v1/bindings", token: key).decode(BindingList.self)
            #expect(list.data.map(\.token) == ["live-token"])
        }
    }
}
