import Foundation
import RingRelayKit
import RingRelayTesting
import RingRelayWire
import Testing

/// Whatever a VoIP push holds, it is reported to the system call UI exactly once, and a push that
/// must not ring is ended right after.
@Suite("Push properties")
struct PushPropertyTests {
    static let cases = 1_500

    @Test("Random and malformed dictionaries yield exactly one report each", arguments: [0x5EED_0001, 0x5EED_0002] as [UInt64])
    func randomDictionaries(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let seeds = try Self.validPushes()
        for index in 0..<Self.cases {
            let push = index.isMultiple(of: 2) ? Self.mutated(seeds.randomElement(using: &random)!, using: &random) : Self.randomDictionary(using: &random)
            try Self.expectOneReport(for: push, caseNumber: index)
        }
    }

    @Test("Random bytes yield exactly one report each")
    func randomBytes() {
        var random = SeededGenerator(seed: 0xB17E5)
        for index in 0..<Self.cases {
            let length = Int.random(in: 0..<64, using: &random)
            let data = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &random) })
            let ui = RecordingSystemUI()
            let report = CallManager.testing(ui: ui).handlePush(data)
            #expect(ui.incomingReports.map(\.uuid) == [report.uuid], "case \(index)")
            #expect(ui.endReasons(for: report.uuid) == [.failed], "case \(index)")
        }
    }

    @Test("The same push twice is one call with one UUID, reported twice")
    func repeatedPush() throws {
        var random = SeededGenerator(seed: 0xD0B1E)
        for push in try Self.validPushes() + (0..<200).map({ _ in Self.randomDictionary(using: &random) }) {
            let ui = RecordingSystemUI()
            let manager = CallManager.testing(ui: ui)
            let first = manager.handlePush(push)
            let second = manager.handlePush(push)
            #expect(first.uuid == second.uuid)
            #expect(ui.incomingReports.map(\.uuid) == [first.uuid, first.uuid])
            #expect(manager.calls.count <= 1)
            #expect(first.call === second.call)
        }
    }

    // MARK: Checking

    private static func expectOneReport(for push: [AnyHashable: Any], caseNumber: Int) throws {
        let ui = RecordingSystemUI()
        let manager = CallManager.testing(ui: ui)
        let report = manager.handlePush(push)
        #expect(ui.incomingReports.map(\.uuid) == [report.uuid], "case \(caseNumber): \(push)")
        switch report.outcome {
        case .call(let call):
            #expect(call.state == .ringing, "case \(caseNumber)")
            #expect(call.uuid == report.uuid)
            #expect(ui.endReasons(for: report.uuid).isEmpty, "case \(caseNumber)")
        case .endedAtOnce(let reason):
            #expect(ui.endReasons(for: report.uuid) == [reason], "case \(caseNumber): \(push)")
            #expect(manager.calls.isEmpty)
        }
    }

    // MARK: Generating

    private static func validPushes() throws -> [[AnyHashable: Any]] {
        try ["voip-push-call-shape", "voip-push-cancel-real-2017", "webex-voip-push-bsft.constructed", "ringrelay-fcm-data"]
            .map(Fixture.dictionary) + [Make.invite("call_prop"), Make.invite("call_old", expiresAt: Dates.sent)]
    }

    private static let interestingKeys = [
        "aps", "ringrelay", "twi_message_type", "twi_call_sid", "twi_from", "bsft", "webhookTelephonyPush", "content-available",
        "callId", "from", "expiresAt", "sentAt", "v", "sender",
    ]

    /// A valid push with a few members removed, replaced or nested wrongly.
    private static func mutated(_ push: [AnyHashable: Any], using random: inout SeededGenerator) -> [AnyHashable: Any] {
        var result = push
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            switch Int.random(in: 0..<4, using: &random) {
            case 0: result[result.keys.randomElement(using: &random) ?? AnyHashable("aps")] = nil
            case 1: result[interestingKeys.randomElement(using: &random)!] = randomValue(depth: 1, using: &random)
            case 2:
                if var invite = result["ringrelay"] as? [String: Any], let key = invite.keys.randomElement(using: &random) {
                    invite[key] = Bool.random(using: &random) ? nil : randomValue(depth: 1, using: &random)
                    result["ringrelay"] = invite
                }
            default: result["twi_message_type"] = ["twilio.voice.call", "twilio.voice.cancel", "twilio.voice.other", ""].randomElement(using: &random)
            }
        }
        return result
    }

    private static func randomDictionary(using random: inout SeededGenerator) -> [AnyHashable: Any] {
        var result: [AnyHashable: Any] = [:]
        for _ in 0..<Int.random(in: 0...5, using: &random) {
            let key: AnyHashable = Int.random(in: 0..<10, using: &random) == 0 ? AnyHashable(Int.random(in: 0..<9, using: &random)) : AnyHashable(randomKey(using: &random))
            result[key] = randomValue(depth: 2, using: &random)
        }
        return result
    }

    private static func randomKey(using random: inout SeededGenerator) -> String {
        Bool.random(using: &random) ? interestingKeys.randomElement(using: &random)! : randomString(using: &random)
    }

    private static func randomString(using random: inout SeededGenerator) -> String {
        let alphabet = Array("abcXYZ_019 :{}\"é📞")
        return String((0..<Int.random(in: 0..<12, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
    }

    private static func randomValue(depth: Int, using random: inout SeededGenerator) -> Any {
        switch Int.random(in: 0..<(depth > 0 ? 11 : 8), using: &random) {
        case 0: return randomString(using: &random)
        case 1: return Int.random(in: -5...5, using: &random)
        case 2: return Double.random(in: -1e6...1e6, using: &random)
        case 3: return Bool.random(using: &random)
        case 4: return NSNull()
        case 5: return Date(timeIntervalSince1970: Double.random(in: 0...2e9, using: &random))
        case 6: return ["twilio.voice.call", "twilio.voice.cancel", "{\"v\":1}", "{\"callId\":\"call_x\"}", "[]"].randomElement(using: &random)!
        case 7: return Make.iso(Date(timeIntervalSince1970: Double.random(in: 1.8e9...2e9, using: &random)))
        case 8: return (0..<Int.random(in: 0...3, using: &random)).map { _ in randomValue(depth: depth - 1, using: &random) }
        default:
            var object: [String: Any] = [:]
            for _ in 0..<Int.random(in: 0...4, using: &random) {
                object[randomKey(using: &random)] = randomValue(depth: depth - 1, using: &random)
            }
            return object
        }
    }
}
