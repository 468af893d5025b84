import Foundation
import RingRelayKit
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing

/// Sealed rings on the callee's device: the Notification Service Extension's decision, and a
/// VoIP push or live event carrying a box, each reported as exactly one call.
@Suite struct SealedRingTests {
    /// An alert push as the server sends it for a sealed call: a neutral alert and the box.
    static func alertPush(callId: String, box: String) -> [AnyHashable: Any] {
        [
            "aps": ["alert": ["title": "Incoming call"], "mutable-content": 1] as [String: Any],
            "ringrelay": ["v": 1, "callId": callId, "sealed": box, "sentAt": Make.iso(Dates.sent), "expiresAt": Make.iso(Dates.expired)],
        ]
    }

    // MARK: Notification Service Extension

    @Test func theExtensionReportsAnOpenedInviteAsAPlainVoIPPayloadThatRingsOnce() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let processor = SealedNotificationProcessor(opener: world.opener())
        let outcome = await processor.process(Self.alertPush(callId: "call_1", box: try world.box()))
        guard case .reportCall(let payload) = outcome else {
            Issue.record("not reported: \(outcome)")
            return
        }
        let invite = try #require(payload["ringrelay"])
        #expect(invite["callId"] == .string("call_1"))
        #expect(invite["from"]?["displayName"] == .string("Alice Liddell"))
        #expect(invite["metadata"] == .object(["room": .string("r-42")]))
        #expect(invite["sealed"] == nil)

        // What CallKit hands the app's PushKit delegate: one call, Alice's, on video.
        let ui = RecordingSystemUI()
        let manager = CallManager.testing(ui: ui, now: Dates.ringing)
        let dictionary = try #require(payload.foundationObject as? [AnyHashable: Any])
        let report = manager.handlePush(dictionary)
        let call = try #require(report.call)
        #expect(call.remote.displayName == "Alice Liddell")
        #expect(call.media == .video)
        #expect(call.serverCallId == "call_1")
        #expect(ui.incomingReports.count == 1)
    }

    @Test func theExtensionSuppressesARefusedInviteAndPassesOthersThrough() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let processor = SealedNotificationProcessor(opener: world.opener())
        let push = Self.alertPush(callId: "call_1", box: try world.box())
        guard case .reportCall = await processor.process(push) else {
            Issue.record("the first delivery was not reported")
            return
        }
        // The same push again (APNs redelivered it, or the app's live connection opened it first).
        #expect(await processor.process(push) == .suppress(.replayed))
        #expect(await processor.process(Self.alertPush(callId: "call_2", box: "AAAA")) == .suppress(.malformed))
        // A plain invite and someone else's notification are none of its business.
        #expect(await processor.process(Make.invite("call_3")) == .passThrough)
        #expect(await processor.process(["aps": ["alert": ["title": "New message"]]]) == .passThrough)
    }

    @Test func openSealedInviteReadsTheBoxOfAPush() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let payload = world.payload()
        #expect(try await world.opener().openSealedInvite(userInfo: Self.alertPush(callId: "call_1", box: try world.box(payload))) == payload)
        await #expect(throws: SealedInviteRefusal.malformed) { try await world.opener().openSealedInvite(userInfo: Make.invite("call_2")) }
    }

    // MARK: VoIP push and live event

    static func manager(_ ui: RecordingSystemUI, opener: SealedInviteOpener?) -> CallManager {
        CallManager(
            systemUI: ui, configuration: .init(callbackExecutor: InlineExecutor(), now: { Dates.ringing }), sealedInvites: opener)
    }

    @Test func aSealedVoIPPushIsReportedAtOnceThenShowsTheCallerFromTheBox() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let ui = RecordingSystemUI()
        let manager = Self.manager(ui, opener: world.opener())
        let report = manager.handlePush(Self.alertPush(callId: "call_1", box: try world.box()))
        // Reported before handlePush returned, as PushKit requires, without a caller yet.
        let call = try #require(report.call)
        #expect(ui.incomingReports.map(\.uuid) == [call.uuid])
        #expect(await eventually { call.remote.displayName == "Alice Liddell" })
        #expect(call.media == .video)
        #expect(call.metadata == .object(["room": .string("r-42")]))
        #expect(await eventually { ui.records.contains(.updated(IncomingCallReport(uuid: call.uuid, caller: call.remote, hasVideo: true))) })
        #expect(ui.incomingReports.count == 1)
        #expect(call.state == .ringing)
    }

    @Test func anFCMDataMessageCarryingABoxIsOpenedTheSameWay() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let ui = RecordingSystemUI()
        let manager = Self.manager(ui, opener: world.opener())
        // FCM data values are strings: the invite arrives as JSON text under `ringrelay`.
        let invite: [String: Any] = [
            "v": 1, "callId": "call_1", "sealed": try world.box(), "sentAt": Make.iso(Dates.sent), "expiresAt": Make.iso(Dates.expired),
        ]
        let text = String(decoding: try JSONSerialization.data(withJSONObject: invite), as: UTF8.self)
        let call = try #require(manager.handlePush(["ringrelay": text]).call)
        #expect(await eventually { call.remote.displayName == "Alice Liddell" })
        #expect(ui.incomingReports.count == 1)
    }

    @Test func aSealedRingThatDoesNotOpenEndsAsFailed() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        var tampered = try #require(Data(base64Encoded: try world.box()))
        tampered[tampered.count - 1] ^= 0x01
        for opener in [world.opener(), nil] {
            let ui = RecordingSystemUI()
            let manager = Self.manager(ui, opener: opener)
            let refusals = Mutex<[SealedInviteRefusal]>([])
            let observation = manager.addObserver { event in
                if case .sealedInviteRefused(_, let refusal) = event { refusals.withLock { $0.append(refusal) } }
            }
            defer { observation.cancel() }
            let call = try #require(manager.handlePush(Self.alertPush(callId: "call_1", box: tampered.base64EncodedString())).call)
            #expect(await eventually { ui.endReasons(for: call.uuid) == [.failed] })
            // Observers hear why, when there was an opener to refuse it.
            #expect(refusals.withLock { $0 } == (opener == nil ? [] : [.tampered]))
            #expect(call.state == .ended(.failed))
            #expect(ui.incomingReports.count == 1)
            #expect(!ui.records.contains { if case .updated = $0 { true } else { false } })
        }
    }

    @Test func aLiveRingCarryingABoxIsOpenedTheSameWay() async throws {
        let world = try SealedWorld()
        defer { world.directory.remove() }
        let ui = RecordingSystemUI()
        let manager = Self.manager(ui, opener: world.opener())
        var event = Make.event(.incoming, "evt_1", callId: "call_1")
        event.call.displayName = nil
        event.sealed = try world.box()
        manager.handle(event)
        let call = try #require(manager.calls.first)
        #expect(await eventually { call.remote.displayName == "Alice Liddell" })
        // The VoIP push of the same call, with its own box, is the same call: reported, not opened again.
        let report = manager.handlePush(Self.alertPush(callId: "call_1", box: try world.box()))
        #expect(report.call === call)
        #expect(manager.calls.count == 1)
        #expect(call.state == .ringing)
    }
}
