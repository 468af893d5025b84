import Foundation
import Hummingbird
import Logging
import RingRelayCore
import RingRelayWire

/// `/v1/credentials`: an account's push and provider credentials. Secrets go in, never out.
struct CredentialsController {
    let store: any DataStore
    let clock: any WallClock
    /// Told of every change: every instance forgets the account's cached credential and the
    /// faults the old one caused.
    let cluster: ClusterSync
    /// Largest request body accepted.
    let maxBodyBytes: Int
    /// Hosts an FCM service account's `token_uri` may name.
    let fcmTokenHosts: Set<String>

    func register(on router: Router<RingRelayRequestContext>) {
        router.put("/v1/credentials/apns") { request, context in
            try await put(request, context) { Credential.apns(try CredentialValidator.apns($0)) }
        }
        router.put("/v1/credentials/fcm") { request, context in
            try await put(request, context) { Credential.fcm(try CredentialValidator.fcm($0, tokenHosts: fcmTokenHosts)) }
        }
        router.put("/v1/credentials/twilio") { request, context in
            try await put(request, context) { Credential.twilio(try CredentialValidator.twilio($0)) }
        }
        router.put("/v1/credentials/webex") { request, context in
            try await put(request, context) { Credential.webex(try CredentialValidator.webex($0)) }
        }
        router.get("/v1/credentials") { _, context in
            let accountID = try context.requireAccountKey()
            return JSONResponse(CredentialsResource(try await store.credentials(accountID: accountID)))
        }
        // One route per kind: the router prefers a static segment over a parameter, so a
        // `/v1/credentials/:kind` route would never see requests for the kinds above.
        for kind in CredentialKind.allCases {
            router.delete("/v1/credentials/\(kind.rawValue)") { _, context in try await delete(kind, context) }
        }
    }

    private func put<Body: Decodable>(
        _ request: Request, _ context: RingRelayRequestContext, validate: (Body) throws -> Credential
    ) async throws -> JSONResponse<CredentialsResource> {
        let accountID = try context.requireAccountKey()
        let body = try await request.decodeJSON(Body.self, maxBytes: maxBodyBytes)
        let credential = try validate(body)
        try await store.putCredential(credential, accountID: accountID, at: clock.now)
        await cluster.announce(.credentialsChanged(accountID: accountID, kind: credential.kind))
        context.logger.info("credential stored", metadata: ["credential.kind": .string(credential.kind.rawValue)])
        return JSONResponse(CredentialsResource(try await store.credentials(accountID: accountID)))
    }

    private func delete(_ kind: CredentialKind, _ context: RingRelayRequestContext) async throws -> Response {
        let accountID = try context.requireAccountKey()
        let deleted = try await store.deleteCredential(kind: kind, accountID: accountID)
        // Whatever it found: nothing cached may outlive the delete, here or elsewhere.
        await cluster.announce(.credentialsChanged(accountID: accountID, kind: kind))
        guard deleted else {
            throw RingRelayError(.notFound, code: .credentialNotFound, "No \(kind.rawValue) credential is configured.")
        }
        context.logger.info("credential deleted", metadata: ["credential.kind": .string(kind.rawValue)])
        return Response(status: .noContent)
    }
}
