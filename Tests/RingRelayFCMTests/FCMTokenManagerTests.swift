import Foundation
import RingRelayCore
import RingRelayTesting
import Synchronization
import Testing

@testable import RingRelayFCM

/// Access token caching, refresh and single flight, with a manual clock and a fake token endpoint.
@Suite struct FCMTokenManagerTests {
    /// A token endpoint that counts its calls and answers what the test says.
    final class FakeEndpoint: Sendable {
        let calls = Mutex(0)
        let failure = Mutex<FCMOAuthError?>(nil)
        let lifetime: TimeInterval
        let delay: Duration

        init(lifetime: TimeInterval = 3599, delay: Duration = .milliseconds(50)) {
            self.lifetime = lifetime
            self.delay = delay
        }

        var count: Int { calls.withLock { $0 } }

        func exchange(_ account: FCMServiceAccount, _ assertion: String) async throws(FCMOAuthError) -> FCMTokenGrant {
            let call = calls.withLock { count in
                count += 1
                return count
            }
            try? await Task.sleep(for: delay)
            if let failure = failure.withLock({ $0 }) { throw failure }
            return FCMTokenGrant(accessToken: "token-\(call)", expiresIn: lifetime)
        }
    }

    static let credential: FCMCredential = {
        let json = (try? TestCredentials.serviceAccount(projectID: "proj", tokenURI: "https://sim.test/token")) ?? [:]
        let text = String(decoding: (try? JSONSerialization.data(withJSONObject: json)) ?? Data(), as: UTF8.self)
        return FCMCredential(serviceAccountJSON: text, projectID: "proj", clientEmail: json["client_email"] ?? "", tokenURI: "https://sim.test/token")
    }()

    static func manager(_ endpoint: FakeEndpoint, clock: ManualWallClock) -> FCMTokenManager {
        FCMTokenManager(
            clock: clock,
            exchange: { account, assertion async throws(FCMOAuthError) -> FCMTokenGrant in
                try await endpoint.exchange(account, assertion)
            })
    }

    @Test func aBurstOfConcurrentSendsMintsOneToken() async throws {
        let endpoint = FakeEndpoint(delay: .milliseconds(200))
        let clock = ManualWallClock(start: Date())
        let minted = Counter()
        let manager = FCMTokenManager(
            clock: clock,
            exchange: { account, assertion async throws(FCMOAuthError) -> FCMTokenGrant in
                try await endpoint.exchange(account, assertion)
            }, onMint: { minted.increment() })
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 {
                group.addTask { try await manager.token(for: Self.credential).value }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(tokens.count == 50)
        #expect(Set(tokens) == ["token-1"])
        #expect(endpoint.count == 1)
        #expect(minted.value == 1)
    }

    @Test func tokenIsReusedAndRefreshedFiveMinutesBeforeExpiry() async throws {
        let endpoint = FakeEndpoint(lifetime: 3600, delay: .zero)
        let clock = ManualWallClock(start: Date())
        let manager = Self.manager(endpoint, clock: clock)
        let first = try await manager.token(for: Self.credential)
        #expect(first.value == "token-1")
        #expect(first.expiresAt == first.issuedAt.addingTimeInterval(3600))

        clock.advance(by: 54 * 60)
        #expect(try await manager.token(for: Self.credential).value == "token-1")
        #expect(endpoint.count == 1)

        // Less than 5 minutes left: the current token is still handed out while one refresh runs.
        clock.advance(by: 2 * 60)
        #expect(try await manager.token(for: Self.credential).value == "token-1")
        #expect(try await manager.token(for: Self.credential).value.hasPrefix("token-"))
        await manager.waitForPendingMint(for: Self.credential)
        #expect(endpoint.count == 2)
        let refreshed = try await manager.token(for: Self.credential)
        #expect(refreshed.value == "token-2")
        #expect(refreshed.issuedAt == clock.now)
    }

    @Test func aNewKeyForTheSameAccountIsAnotherCredential() async throws {
        let endpoint = FakeEndpoint(lifetime: 3600, delay: .zero)
        let manager = Self.manager(endpoint, clock: ManualWallClock(start: Date()))
        var rotated = Self.credential
        rotated.serviceAccountJSON += " "
        // Hashed alike (the names are the same), told apart by equality.
        #expect(rotated.hashValue == Self.credential.hashValue)
        #expect(rotated != Self.credential)
        #expect(try await manager.token(for: Self.credential).value == "token-1")
        #expect(try await manager.token(for: rotated).value == "token-2")
        #expect(try await manager.token(for: Self.credential).value == "token-1")
        #expect(endpoint.count == 2)
    }

    @Test func expiredTokenIsNeverHandedOut() async throws {
        let endpoint = FakeEndpoint(lifetime: 3600, delay: .zero)
        let clock = ManualWallClock(start: Date())
        let manager = Self.manager(endpoint, clock: clock)
        _ = try await manager.token(for: Self.credential)
        clock.advance(by: 3600 - 10)  // within the last 30 seconds: treated as expired
        #expect(try await manager.token(for: Self.credential).value == "token-2")
        #expect(endpoint.count == 2)
    }

    @Test func failedRefreshKeepsTheCurrentTokenAndWaitsBeforeTryingAgain() async throws {
        let endpoint = FakeEndpoint(lifetime: 3600, delay: .zero)
        let clock = ManualWallClock(start: Date())
        let manager = Self.manager(endpoint, clock: clock)
        _ = try await manager.token(for: Self.credential)
        endpoint.failure.withLock { $0 = FCMOAuthError(reason: "OAuthUnavailable", disposition: .retry, status: 503, detail: "down") }
        clock.advance(by: 56 * 60)
        #expect(try await manager.token(for: Self.credential).value == "token-1")
        await manager.waitForPendingMint(for: Self.credential)
        #expect(endpoint.count == 2)
        // Not on every push: the next refresh waits for the hold-off.
        #expect(try await manager.token(for: Self.credential).value == "token-1")
        await manager.waitForPendingMint(for: Self.credential)
        #expect(endpoint.count == 2)
        endpoint.failure.withLock { $0 = nil }
        clock.advance(by: 31)
        _ = try await manager.token(for: Self.credential)
        await manager.waitForPendingMint(for: Self.credential)
        #expect(try await manager.token(for: Self.credential).value == "token-3")
    }

    @Test func rejectedAccountIsHeldOffInsteadOfAskingOnEveryPush() async throws {
        let endpoint = FakeEndpoint(delay: .zero)
        let clock = ManualWallClock(start: Date())
        let manager = Self.manager(endpoint, clock: clock)
        let rejection = FCMOAuthError(reason: "OAuthInvalidGrant", disposition: .fixConfiguration, status: 400, detail: "Invalid JWT Signature.")
        endpoint.failure.withLock { $0 = rejection }
        for _ in 0..<3 {
            await #expect(throws: rejection) { try await manager.token(for: Self.credential) }
        }
        #expect(endpoint.count == 1)
        endpoint.failure.withLock { $0 = nil }
        clock.advance(by: 31)
        #expect(try await manager.token(for: Self.credential).value == "token-2")
    }

    @Test func transientFailureIsNotHeldOff() async throws {
        let endpoint = FakeEndpoint(delay: .zero)
        let clock = ManualWallClock(start: Date())
        let manager = Self.manager(endpoint, clock: clock)
        endpoint.failure.withLock { $0 = FCMOAuthError(reason: "OAuthTimeout", disposition: .retry, detail: "slow") }
        await #expect(throws: FCMOAuthError.self) { try await manager.token(for: Self.credential) }
        endpoint.failure.withLock { $0 = nil }
        #expect(try await manager.token(for: Self.credential).value == "token-2")
    }

    @Test func aRejectedTokenIsReplacedOnlyWhenOldEnough() async throws {
        let endpoint = FakeEndpoint(delay: .zero)
        let clock = ManualWallClock(start: Date())
        let manager = Self.manager(endpoint, clock: clock)
        let token = try await manager.token(for: Self.credential)
        // Minted seconds ago and already refused: the account is at fault, minting again won't help.
        #expect(await manager.reportRejected(token.value, for: Self.credential) == false)
        #expect(try await manager.token(for: Self.credential).value == "token-1")
        clock.advance(by: 120)
        #expect(await manager.reportRejected(token.value, for: Self.credential) == true)
        #expect(try await manager.token(for: Self.credential).value == "token-2")
        // A report about a token already replaced only asks for a retry.
        #expect(await manager.reportRejected(token.value, for: Self.credential) == true)
        #expect(endpoint.count == 2)
    }

    @Test func unreadableKeyIsAConfigurationFault() async throws {
        let endpoint = FakeEndpoint(delay: .zero)
        let manager = Self.manager(endpoint, clock: ManualWallClock(start: Date()))
        let broken = FCMCredential(
            serviceAccountJSON: #"{"private_key":"-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n"}"#, projectID: "p",
            clientEmail: "a@b", tokenURI: "https://t")
        do {
            _ = try await manager.token(for: broken)
            Issue.record("expected a failure")
        } catch {
            #expect(error.reason == "InvalidCredential")
            #expect(error.disposition == .fixConfiguration)
            #expect(!error.detail.contains("BEGIN"))
        }
        #expect(endpoint.count == 0)
    }
}

/// A thread-safe counter.
final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func increment() { count.withLock { $0 += 1 } }
}
