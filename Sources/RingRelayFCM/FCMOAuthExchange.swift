import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import RingRelayCore

/// The token request of the JWT-bearer grant: the signed assertion in, an access token out.
enum FCMOAuthExchange {
    /// Posts `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=…` to the account's
    /// `token_uri` and reads `access_token` and `expires_in`.
    ///
    /// - Throws: ``FCMOAuthError``: `fixConfiguration` when the endpoint refuses the assertion
    ///   (`invalid_grant`, `invalid_client`, …) or answers nonsense; `retry` for 429, 5xx,
    ///   timeouts and connection errors.
    static func exchange(
        _ assertion: String, for account: FCMServiceAccount, transport: FCMTransport, timeout: Duration, logger: Logger
    ) async throws(FCMOAuthError) -> FCMTokenGrant {
        guard let client = transport.client() else {
            throw FCMOAuthError(reason: "ClientShutDown", disposition: .drop, detail: "the FCM client is shut down")
        }
        var request = HTTPClientRequest(url: account.tokenURI)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "accept", value: "application/json")
        request.body = .bytes(ByteBuffer(string: FCMOAuthAssertion.tokenRequestBody(assertion: assertion)))

        let status: Int
        let body: ByteBuffer
        do {
            let response = try await client.execute(request, timeout: TimeAmount(timeout))
            status = Int(response.status.code)
            body = try await response.body.collect(upTo: 64 * 1024)
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            throw FCMOAuthError(reason: "OAuthTimeout", disposition: .retry, detail: "the token endpoint did not answer in time")
        } catch {
            logger.debug("FCM token endpoint unreachable", metadata: ["push.reason": "\(error)"])
            throw FCMOAuthError(reason: "OAuthConnectionError", disposition: .retry, detail: "cannot reach the token endpoint")
        }

        let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any]
        if status == 200 {
            guard let token = object?["access_token"] as? String, !token.isEmpty,
                let expiresIn = Self.seconds(object?["expires_in"]), expiresIn > 0
            else {
                throw FCMOAuthError(
                    reason: "OAuthInvalidResponse", disposition: .fixConfiguration, status: status,
                    detail: "the token endpoint's answer has no access_token and expires_in; check token_uri")
            }
            return FCMTokenGrant(accessToken: token, expiresIn: expiresIn)
        }

        let transient = status == 429 || status >= 500
        let error: FCMOAuthError
        if let code = object?["error"] as? String, !code.isEmpty {
            // Our words, not the endpoint's: what it wrote would reach API answers verbatim.
            let reason = FCMOAuthError.reason(forOAuthError: code)
            error = FCMOAuthError(
                reason: reason, disposition: transient ? .retry : .fixConfiguration, status: status,
                detail: "the token endpoint refused the service account (\(reason), HTTP \(status))")
            logger.debug(
                "FCM token endpoint's own words", metadata: ["fcm.oauth.description": .string(String(((object?["error_description"] as? String) ?? code).prefix(200)))])
        } else if transient {
            error = FCMOAuthError(reason: "OAuthUnavailable", disposition: .retry, status: status, detail: "the token endpoint answered \(status)")
        } else {
            error = FCMOAuthError(
                reason: "OAuthHTTP\(status)", disposition: .fixConfiguration, status: status, detail: "the token endpoint answered \(status)")
        }
        let metadata: Logger.Metadata = [
            "push.reason": .string(error.reason), "fcm.client_email": .string(account.clientEmail),
            "fcm.oauth.description": .string(error.detail),
        ]
        if error.disposition == .fixConfiguration {
            logger.warning("FCM token endpoint refused the service account", metadata: metadata)
        } else {
            logger.debug("FCM token endpoint unavailable", metadata: metadata)
        }
        throw error
    }

    /// `expires_in` as a number, or a numeric string (some endpoints send one).
    private static func seconds(_ value: Any?) -> TimeInterval? {
        if let number = value as? Double { return number }
        if let number = value as? Int { return TimeInterval(number) }
        if let text = value as? String { return TimeInterval(text) }
        return nil
    }
}
