import Crypto
import Foundation
import RingRelayKit
import RingRelayTesting
import RingRelayWire
import Testing

/// The two files sealed calls keep: the invites opened (shared by an app and its extension) and
/// the callees' keys sealed to before (trust on first use).
@Suite struct SealedStoreTests {
    // MARK: Replays

    @Test func twoStoresOnOneFileOpenAnInviteOnce() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        // The app and its extension: two openers, each with its own store on the same file.
        let app = world.opener(replayFile: "shared.json")
        let appExtension = world.opener(replayFile: "shared.json")
        let payload = world.payload()
        #expect(await refusal(appExtension, try world.box(payload)) == nil)
        #expect(await refusal(app, try world.box(payload)) == .replayed)
        // A store opened afterwards reads the same record.
        #expect(await refusal(world.opener(replayFile: "shared.json"), try world.box(payload)) == .replayed)
    }

    @Test func storesRacingOnOneFileAcceptEachInviteExactlyOnce() async throws {
        let directory = try TemporaryDirectory(prefix: "ringrelay-replay")
        defer { directory.remove() }
        let url = URL(fileURLWithPath: directory.appending("shared.json"))
        let stores = [InviteReplayStore(fileURL: url), InviteReplayStore(fileURL: url)]
        let now = Dates.sent
        let invites = (0..<20).map { "invite-\($0)" }
        // Every invite is offered 4 times, by both stores, from many tasks at once.
        let accepted = await withTaskGroup(of: String?.self) { group in
            for invite in invites {
                for attempt in 0..<4 {
                    group.addTask {
                        let store = stores[attempt % 2]
                        return (try? store.recordFirstOpening(of: invite, expiresAt: now.addingTimeInterval(60), now: now)) == true ? invite : nil
                    }
                }
            }
            var accepted: [String] = []
            for await invite in group { invite.map { accepted.append($0) } }
            return accepted
        }
        #expect(accepted.sorted() == invites.sorted())
        #expect(try stores[0].count() == invites.count)
    }

    @Test func expiredInvitesAreForgottenAndAFullStoreRefusesRatherThanForgets() throws {
        let directory = try TemporaryDirectory(prefix: "ringrelay-replay")
        defer { directory.remove() }
        let store = InviteReplayStore(fileURL: URL(fileURLWithPath: directory.appending("replays.json")), capacity: 3)
        let now = Dates.sent
        #expect(try store.recordFirstOpening(of: "short", expiresAt: now.addingTimeInterval(10), now: now))
        #expect(try store.recordFirstOpening(of: "long", expiresAt: now.addingTimeInterval(100), now: now))
        // After "short" expired, recording anything forgets it.
        #expect(try store.recordFirstOpening(of: "later", expiresAt: now.addingTimeInterval(50), now: now.addingTimeInterval(20)))
        #expect(try store.count() == 2)
        #expect(try store.recordFirstOpening(of: "a", expiresAt: now.addingTimeInterval(90), now: now.addingTimeInterval(20)))
        #expect(try store.count() == 3)
        // Full of unexpired invites: a new one is refused, and none of those kept is forgotten.
        #expect(throws: InviteReplayStore.Full.self) {
            try store.recordFirstOpening(of: "b", expiresAt: now.addingTimeInterval(95), now: now.addingTimeInterval(20))
        }
        #expect(try !store.recordFirstOpening(of: "later", expiresAt: now.addingTimeInterval(50), now: now.addingTimeInterval(20)))
        #expect(try !store.recordFirstOpening(of: "long", expiresAt: now.addingTimeInterval(100), now: now.addingTimeInterval(20)))
        // Once one expires, there is room again.
        #expect(try store.recordFirstOpening(of: "b", expiresAt: now.addingTimeInterval(95), now: now.addingTimeInterval(51)))
        #expect(try store.count() == 3)
    }

    /// The flush the store's old bound allowed (issue 42): whoever can make boxes opens 1,024
    /// fresh invites, the store forgot the oldest to make room, and an invite opened before
    /// opened again. Now the store refuses the fresh ones once it is full, and the old one stays
    /// a replay until it expires.
    @Test func freshInvitesCannotFlushAnUnexpiredOne() throws {
        let directory = try TemporaryDirectory(prefix: "ringrelay-replay")
        defer { directory.remove() }
        let store = InviteReplayStore(fileURL: URL(fileURLWithPath: directory.appending("replays.json")))
        #expect(store.capacity == 1024)
        let now = Dates.sent
        #expect(try store.recordFirstOpening(of: "victim", expiresAt: now.addingTimeInterval(60), now: now))
        var recorded = 0
        var refused = 0
        for index in 0..<1024 {
            do {
                if try store.recordFirstOpening(of: "fresh-\(index)", expiresAt: now.addingTimeInterval(120), now: now) { recorded += 1 }
            } catch is InviteReplayStore.Full {
                refused += 1
            }
        }
        #expect(recorded == 1023 && refused == 1)
        #expect(try !store.recordFirstOpening(of: "victim", expiresAt: now.addingTimeInterval(60), now: now.addingTimeInterval(30)))
        #expect(try store.count() == 1024)
    }

    // MARK: Trust on first use

    static func key(_ bindingId: String, _ privateKey: P256.KeyAgreement.PrivateKey, device: String? = nil) -> DeviceKeyResource {
        DeviceKeyResource(
            bindingId: bindingId, deviceId: device, type: "apns_alert", publicKey: privateKey.publicKey.base64X963, registeredAt: Dates.sent)
    }

    @Test func firstContactReportsNothingAndEveryLaterChangeIsReported() throws {
        let directory = try TemporaryDirectory(prefix: "ringrelay-tofu")
        defer { directory.remove() }
        let url = URL(fileURLWithPath: directory.appending("known-keys.json"))
        let phone = P256.KeyAgreement.PrivateKey()
        let tablet = P256.KeyAgreement.PrivateKey()
        let laptop = P256.KeyAgreement.PrivateKey()
        let reinstalled = P256.KeyAgreement.PrivateKey()

        let store = KnownDeviceKeys(fileURL: url)
        #expect(try store.record([Self.key("bnd_1", phone, device: "phone"), Self.key("bnd_2", tablet)], of: "bob") == nil)
        #expect(try store.record([Self.key("bnd_1", phone, device: "phone"), Self.key("bnd_2", tablet)], of: "bob") == nil)

        // Another instance on the same file (a later launch) sees what the first recorded.
        let later = KnownDeviceKeys(fileURL: url)
        let change = try #require(try later.record([Self.key("bnd_1", reinstalled, device: "phone"), Self.key("bnd_3", laptop)], of: "bob"))
        #expect(change.identity == "bob")
        #expect(change.added == [DeviceKeyChange.Key(bindingId: "bnd_3", deviceId: nil, keyId: DeviceKeyID(of: laptop.publicKey))])
        #expect(change.removed == [DeviceKeyChange.Key(bindingId: "bnd_2", deviceId: nil, keyId: DeviceKeyID(of: tablet.publicKey))])
        #expect(
            change.changed == [
                DeviceKeyChange.Replacement(
                    before: .init(bindingId: "bnd_1", deviceId: "phone", keyId: DeviceKeyID(of: phone.publicKey)),
                    now: .init(bindingId: "bnd_1", deviceId: "phone", keyId: DeviceKeyID(of: reinstalled.publicKey)))
            ])
        // Reported once: the new set is what is known now.
        #expect(try store.record([Self.key("bnd_1", reinstalled, device: "phone"), Self.key("bnd_3", laptop)], of: "bob") == nil)
        // Identities are kept apart.
        #expect(try store.record([Self.key("bnd_9", phone)], of: "carol") == nil)
    }

    @Test func keyIdsAreTheFingerprintOfTheX963Key() throws {
        let key = try P256.KeyAgreement.PrivateKey(rawRepresentation: Data(repeating: 7, count: 32)).publicKey
        let id = DeviceKeyID(of: key)
        #expect(id.bytes == Data(SHA256.hash(data: key.x963Representation).prefix(16)))
        #expect(id.description.count == 32)
        #expect(DeviceKeyID(publicKey: key.base64X963) == id)
        #expect(DeviceKeyID(publicKey: "AAAA") == nil)
        let encoded = try JSONEncoder().encode(id)
        #expect(try JSONDecoder().decode(DeviceKeyID.self, from: encoded) == id)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(DeviceKeyID.self, from: Data(#""abc""#.utf8)) }
    }
}
