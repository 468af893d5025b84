import Crypto
import Foundation
import RingRelayKit
import RingRelayTesting
import RingRelayWire
import Testing

/// Sealing and opening invites: what opens, and every reason a box is refused.
@Suite struct SealedInviteTests {
    @Test func aBoxOpensToThePayloadSealedInIt() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let payload = world.payload()
        let opened = try await world.opener().open(try world.box(payload), callId: SealedWorld.callId)
        #expect(opened == payload)
        #expect(opened.caller.displayName == "Alice Liddell")
        #expect(opened.metadata == .object(["room": .string("r-42")]))
    }

    @Test func theBoxIsCompactBinaryThatNamesOnlyTheRecipient() throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let bytes = try #require(Data(base64Encoded: try world.box()))
        // Version 1, then RFC 9180's ids of DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-256-GCM.
        #expect(Array(bytes.prefix(7)) == [1, 0x00, 0x10, 0x00, 0x01, 0x00, 0x02])
        #expect(bytes.subdata(in: 7..<23) == world.bob.keyId.bytes)
        #expect(String(decoding: bytes.subdata(in: 24..<24 + Int(bytes[23])), as: UTF8.self) == SealedWorld.bobBinding)
        // Nothing about the caller is readable.
        for secret in ["alice", "Alice Liddell", "alice-phone", "r-42", "video", world.alice.keyId.description] {
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret)")
        }
    }

    @Test func aBoxForAnotherKeyIsRefusedAsWrongKey() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        // Bob reinstalled: his new key cannot open what was sealed to the old one.
        var reinstalled = world.bob
        reinstalled.privateKey = P256.KeyAgreement.PrivateKey()
        #expect(await refusal(world.opener(identity: reinstalled), try world.box()) == .wrongKey)
    }

    @Test func aBoxForAnotherBindingOfTheSameKeyIsRefusedAsWrongBinding() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        var voipBinding = world.bobAddress
        voipBinding.bindingId = "bnd_bob_voip"
        let box = try world.box(address: voipBinding)
        #expect(await refusal(world.opener(), box) == .wrongBinding)
        // The device that has that binding opens it.
        #expect(await refusal(world.opener(bindingIds: ["bnd_bob_voip", SealedWorld.bobBinding]), box) == nil)
    }

    @Test func aBoxForAnotherAccountOrIdentityDoesNotDecrypt() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        var otherAccount = world.bobAddress
        otherAccount.accountId = "acc_other"
        var otherIdentity = world.bobAddress
        otherIdentity.identity = "robert"
        #expect(await refusal(world.opener(), try world.box(address: otherAccount)) == .tampered)
        #expect(await refusal(world.opener(), try world.box(address: otherIdentity)) == .tampered)
    }

    @Test func aFlippedByteAnywhereInTheBoxIsRefused() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let bytes = try #require(Data(base64Encoded: try world.box()))
        var refusals: Set<SealedInviteRefusal> = []
        for index in bytes.indices {
            var changed = bytes
            changed[index] ^= 0x01
            // A fresh replay file each time: only the flipped byte can be the reason.
            let opener = world.opener(replayFile: "replays-\(index).json")
            let reason = await refusal(opener, changed.base64EncodedString())
            #expect(reason != nil, "byte \(index) of \(bytes.count)")
            if let reason { refusals.insert(reason) }
        }
        // The header's version and suite, the key id, and the rest.
        #expect(refusals == [.malformed, .wrongKey, .tampered])
    }

    @Test func aBoxThatIsNotOneIsRefusedAsMalformed() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let box = try world.box()
        // Empty, not base64, cut inside the header or the key, or longer than any box may be.
        for text in ["", "not base64!", "AAAA", String(box.prefix(40)), String(box.prefix(120)), String(repeating: "A", count: 3076)] {
            #expect(await refusal(world.opener(), text) == .malformed, "\(text.prefix(20))")
        }
        // Cut inside the ciphertext: it no longer decrypts.
        #expect(await refusal(world.opener(), String(box.dropLast(8))) == .tampered)
    }

    @Test func anExpiredInviteIsRefusedByTheTimeInsideTheBox() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let payload = world.payload()
        let box = try world.box(payload)
        world.clock.set(payload.expiresAt)
        #expect(await refusal(world.opener(), box) == .expired(payload.expiresAt))
        world.clock.set(payload.expiresAt.addingTimeInterval(-1))
        #expect(await refusal(world.opener(), box) == nil)
    }

    /// An invite claims how long it stays valid; one that claims more than five minutes ahead of
    /// the callee's clock is refused, as it would stay replayable (and hold its place in the
    /// replay store) for longer than any ring.
    @Test func anInviteValidForMoreThanFiveMinutesIsRefused() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let tooLong = world.payload(lifetime: 301)
        #expect(await refusal(world.opener(), try world.box(tooLong)) == .expiresTooLate(tooLong.expiresAt))
        #expect(await refusal(world.opener(), try world.box(world.payload(lifetime: 300))) == nil)
        // The refused one was not recorded: once the callee's clock is close enough, it opens.
        world.clock.set(tooLong.expiresAt.addingTimeInterval(-299))
        #expect(await refusal(world.opener(), try world.box(tooLong)) == nil)
    }

    /// A box names its call: delivered with another call's push or event (a replay into a call
    /// the server made up, or a box moved between calls), it is refused.
    @Test func aBoxCarriedByAnotherCallIsRefused() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let payload = world.payload(callId: "call_06h5p0000000000000000000aa")
        let box = try world.box(payload)
        #expect(await refusal(world.opener(), box, callId: "call_06h5p0000000000000000000bb") == .wrongCall)
        // Refused before it was recorded: with its own call it opens, once.
        #expect(await refusal(world.opener(), box, callId: payload.callId) == nil)
        #expect(await refusal(world.opener(), box, callId: payload.callId) == .replayed)
        let processor = SealedNotificationProcessor(opener: world.opener(replayFile: "extension.json"))
        let moved = await processor.process(SealedRingTests.alertPush(callId: "call_06h5p0000000000000000000bb", box: box))
        #expect(moved == .suppress(.wrongCall))
    }

    /// Whoever can make boxes (a caller of the account, or the server with a key it added) cannot
    /// make the device forget an invite by opening many fresh ones: once the replay store is
    /// full of unexpired invites, new ones are refused, and an invite opened before stays a
    /// replay until it expires.
    @Test func freshInvitesCannotFlushTheReplayStore() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let opener = world.opener(replayCapacity: 16)
        let victimPayload = world.payload(lifetime: 60)
        let victim = try world.box(victimPayload)
        #expect(await refusal(opener, victim) == nil)
        var refusals: [SealedInviteRefusal?] = []
        for _ in 0..<16 { refusals.append(await refusal(opener, try world.box(world.payload(lifetime: 120)))) }
        #expect(refusals.filter { $0 == nil }.count == 15)
        #expect(refusals.last == .replayStoreFull)
        #expect(await refusal(opener, victim) == .replayed)
        // When the victim expires it is refused as expired, and its place is free again.
        world.clock.set(victimPayload.expiresAt)
        #expect(await refusal(opener, victim) == .expired(victimPayload.expiresAt))
        #expect(await refusal(opener, try world.box(world.payload(lifetime: 120))) == nil)
        #expect(await refusal(opener, try world.box(world.payload(lifetime: 120))) == .replayStoreFull)
    }

    @Test func theSameInviteOpensOnce() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let payload = world.payload()
        #expect(await refusal(world.opener(), try world.box(payload)) == nil)
        // The same box again, or a new box of the same invite.
        #expect(await refusal(world.opener(), try world.box(payload)) == .replayed)
        #expect(await refusal(world.opener(), try world.box(world.payload())) == nil)
    }

    @Test func aSenderTheDirectoryDoesNotKnowIsRefused() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        // Alice's key is not (or no longer) in the directory.
        let directory = FixedSenderKeys(keys: ["alice": [P256.KeyAgreement.PrivateKey().publicKey]])
        #expect(await refusal(world.opener(senderKeys: directory), try world.box()) == .unknownSender)
    }

    @Test func aBoxNotMadeWithTheKeyTheDirectoryVouchesForIsRefused() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        // Mallory seals in Alice's name with her own key; the directory vouches for Alice's key.
        var mallory = world.alice
        mallory.privateKey = P256.KeyAgreement.PrivateKey()
        let forged = try world.box(by: mallory)
        #expect(await refusal(world.opener(senderKeys: VouchingSenderKeys(key: world.alice.privateKey.publicKey)), forged) == .unauthenticatedSender)
        // Mallory's box names her key id, which Alice's directory entry does not have.
        #expect(await refusal(world.opener(), forged) == .unknownSender)
    }

    @Test func aPayloadNamingAnotherCallerThanItsSenderIsRefused() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        var payload = world.payload()
        payload.caller.identity = "carol"
        #expect(await refusal(world.opener(), try world.box(payload)) == .unauthenticatedSender)
    }

    @Test func aDirectoryOutOfReachRefusesWithoutRecordingTheInvite() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let box = try world.box()
        #expect(await refusal(world.opener(senderKeys: UnreachableSenderKeys()), box) == .senderKeysUnavailable)
        // Once the directory answers, the same box opens.
        #expect(await refusal(world.opener(), box) == nil)
    }

    @Test func aReplayFileThatCannotBeWrittenRefuses() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        #expect(await refusal(world.opener(replayFile: "missing-directory/replays.json"), try world.box()) == .replayStateUnavailable)
        try Data("not json".utf8).write(to: URL(fileURLWithPath: world.directory.appending("garbage.json")))
        #expect(await refusal(world.opener(replayFile: "garbage.json"), try world.box()) == .replayStateUnavailable)
    }

    @Test func everyRefusalSaysWhatHappened() {
        let refusals: [SealedInviteRefusal] = [
            .malformed, .wrongKey, .tampered, .wrongBinding, .expired(Dates.sent), .replayed, .unknownSender, .unauthenticatedSender,
            .senderKeysUnavailable, .replayStateUnavailable, .expiresTooLate(Dates.sent), .wrongCall, .replayStoreFull,
        ]
        #expect(Set(refusals.map(\.description)).count == refusals.count)
        #expect(SealedInviteRefusal.expired(Dates.sent).description.contains("2030-01-01T12:00:00Z"))
    }
}
