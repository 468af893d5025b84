import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayTesting
import RingRelayWire
import Testing

@Suite struct CredentialsTests {
    /// JSON-encodes a dictionary into a request body.
    private func json(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    @Test func apnsTokenKeyIsValidatedStoredAndNeverReturned() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let p8 = TestCredentials.apnsP8()
            let body = try json(["teamId": "ABCDE12345", "keyId": "KEY1234567", "privateKey": p8, "topic": "com.example.app"])
            let put = try await client.send(.put, "/v1/credentials/apns", token: key, json: body)
            #expect(put.status == .ok)
            let summary = try put.decode(CredentialsResource.self)
            #expect(summary.apns?.authentication == "token")
            #expect(summary.apns?.teamId == "ABCDE12345")
            #expect(summary.apns?.topic == "com.example.app")

            let get = try await client.send(.get, "/v1/credentials", token: key)
            let text = String(buffer: get.body)
            #expect(!text.contains("PRIVATE KEY"))
            #expect(!text.contains(String(p8.split(separator: "\n")[1])))
            #expect(try get.decode(CredentialsResource.self).apns?.keyId == "KEY1234567")
        }
    }

    @Test func apnsCertificateIsAccepted() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let body = try json([
                "certificate": TestCredentials.apnsCertificatePEM, "privateKey": TestCredentials.apnsCertificateKeyPEM,
                "topic": "com.example.ringrelay",
            ])
            let response = try await client.send(.put, "/v1/credentials/apns", token: key, json: body)
            #expect(response.status == .ok)
            let summary = try response.decode(CredentialsResource.self)
            #expect(summary.apns?.authentication == "certificate")
            #expect((summary.apns?.certificateExpiresAt ?? .distantPast) > Date())
            #expect(!String(buffer: response.body).contains(TestCredentials.apnsCertificateKeyPEM.split(separator: "\n")[1]))
        }
    }

    @Test func apnsPKCS12IsAcceptedAndCheckedWithItsPassphrase() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let good = try json([
                "pkcs12": TestCredentials.apnsCertificatePKCS12Base64, "passphrase": TestCredentials.apnsCertificatePKCS12Passphrase,
                "topic": "com.example.ringrelay",
            ])
            let response = try await client.send(.put, "/v1/credentials/apns", token: key, json: good)
            #expect(response.status == .ok)
            let summary = try response.decode(CredentialsResource.self)
            #expect(summary.apns?.authentication == "pkcs12")
            #expect((summary.apns?.certificateExpiresAt ?? .distantPast) > Date())
            #expect(!String(buffer: response.body).contains("passphrase"))
            #expect(!String(buffer: response.body).contains(String(TestCredentials.apnsCertificatePKCS12Base64.prefix(40))))

            let wrong = try json(["pkcs12": TestCredentials.apnsCertificatePKCS12Base64, "passphrase": "not-the-passphrase", "topic": "com.x"])
            let refused = try await client.send(.put, "/v1/credentials/apns", token: key, json: wrong)
            #expect(refused.status == .unprocessableContent)
            #expect(String(buffer: refused.body).contains("pkcs12"))
            #expect(!String(buffer: refused.body).contains("not-the-passphrase"))

            let mixed = try json([
                "pkcs12": TestCredentials.apnsCertificatePKCS12Base64, "passphrase": "x", "teamId": "ABCDE12345", "topic": "com.x",
            ])
            #expect(try await client.send(.put, "/v1/credentials/apns", token: key, json: mixed).status == .unprocessableContent)
            let missingKey = try json(["teamId": "ABCDE12345", "keyId": "KEY1234567", "topic": "com.x"])
            #expect(try await client.send(.put, "/v1/credentials/apns", token: key, json: missingKey).errorCode == "missing_field")
        }
    }

    @Test func brokenCredentialsAreRejectedWithoutEchoingSecrets() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let rsaPEM = try TestCredentials.serviceAccount()["private_key"]!
            let secretMarker = "S3CRET-MATERIAL-DO-NOT-ECHO"
            let rsaBody = String(rsaPEM.split(separator: "\n")[1])
            let cases: [(String, [String: Any], String)] = [
                ("apns", ["teamId": "ABCDE12345", "keyId": "KEY1234567", "privateKey": secretMarker, "topic": "com.x"], "privateKey"),
                // An RSA key is a valid PEM but not the P-256 key APNs needs.
                ("apns", ["teamId": "ABCDE12345", "keyId": "KEY1234567", "privateKey": rsaPEM, "topic": "com.x"], "privateKey"),
                ("apns", ["teamId": "abc", "keyId": "KEY1234567", "privateKey": TestCredentials.apnsP8(), "topic": "com.x"], "teamId"),
                ("apns", ["teamId": "ABCDE12345", "keyId": "KEY1234567", "privateKey": TestCredentials.apnsP8(), "topic": "com.x.voip"], "topic"),
                ("apns", ["certificate": secretMarker, "privateKey": secretMarker, "topic": "com.x"], "certificate"),
                ("fcm", ["serviceAccount": ["client_email": "a@b.c", "private_key": rsaPEM, "project_id": "p"]], "token_uri"),
                ("fcm", ["serviceAccount": ["client_email": "a@b.c", "private_key": secretMarker, "project_id": "p", "token_uri": "https://oauth2.googleapis.com/token"]], "private_key"),
                ("twilio", ["accountSid": "XX123", "authToken": secretMarker], "accountSid"),
                ("webex", ["secret": "short"], "secret"),
            ]
            for (kind, body, field) in cases {
                let response = try await client.send(.put, "/v1/credentials/\(kind)", token: key, json: try json(body))
                let text = String(buffer: response.body)
                #expect(response.status == .unprocessableContent, "\(kind) \(field): \(text)")
                #expect(text.contains(field))
                #expect(!text.contains(secretMarker))
                #expect(!text.contains(rsaBody))
            }
            #expect(try await client.send(.get, "/v1/credentials", token: key).decode(CredentialsResource.self) == CredentialsResource())
        }
    }

    /// A service account's token_uri can only name Google's OAuth host (or the operator's
    /// --fcm-endpoint host): anything else would make the server fetch it (issue 16 item 9).
    @Test func fcmTokenURIsArePinnedToGoogle() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            var account = try TestCredentials.serviceAccount()
            for uri in [
                "http://169.254.169.254/latest/meta-data", "http://oauth2.googleapis.com/token", "https://127.0.0.1:22/token",
                "https://internal.example/token", "https://oauth2.googleapis.com.evil.example/token", "https://user:pw@oauth2.googleapis.com/token",
            ] {
                account["token_uri"] = uri
                let response = try await client.send(.put, "/v1/credentials/fcm", token: key, json: try json(["serviceAccount": account]))
                #expect(response.status == .unprocessableContent, "\(uri)")
                #expect(response.errorCode == "invalid_field")
            }
            account["token_uri"] = "https://oauth2.googleapis.com/token"
            #expect(try await client.send(.put, "/v1/credentials/fcm", token: key, json: try json(["serviceAccount": account])).status == .ok)
        }
    }

    @Test func fcmTwilioWebexRoundTripAndDelete() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let serviceAccount = try TestCredentials.serviceAccount(projectID: "my-project")
            #expect(try await client.send(.put, "/v1/credentials/fcm", token: key, json: try json(["serviceAccount": serviceAccount])).status == .ok)
            #expect(
                try await client.send(
                    .put, "/v1/credentials/twilio", token: key,
                    json: #"{"accountSid":"AC0123456789abcdef0123456789abcdef","authToken":"twilio-auth-token-secret"}"#
                ).status == .ok)
            #expect(try await client.send(.put, "/v1/credentials/webex", token: key, json: #"{"secret":"webhook-secret-1"}"#).status == .ok)

            let response = try await client.send(.get, "/v1/credentials", token: key)
            let summary = try response.decode(CredentialsResource.self)
            #expect(summary.fcm?.projectId == "my-project")
            #expect(summary.fcm?.clientEmail == serviceAccount["client_email"])
            #expect(summary.twilio?.accountSid == "AC0123456789abcdef0123456789abcdef")
            #expect(summary.webex != nil)
            let text = String(buffer: response.body)
            #expect(!text.contains("twilio-auth-token-secret"))
            #expect(!text.contains("webhook-secret-1"))

            #expect(try await client.send(.delete, "/v1/credentials/webex", token: key).status == .noContent)
            #expect(try await client.send(.delete, "/v1/credentials/webex", token: key).status == .notFound)
            #expect(try await client.send(.delete, "/v1/credentials/sms", token: key).status == .notFound)
            #expect(try await client.send(.get, "/v1/credentials", token: key).decode(CredentialsResource.self).webex == nil)
        }
    }
}
