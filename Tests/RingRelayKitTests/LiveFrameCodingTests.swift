import Foundation
import RingRelayTesting
import RingRelayWire
import Testing

/// The hand-written live frame coding agrees with the Codable conformances it stands in for.
@Suite("Live frame coding")
struct LiveFrameCodingTests {
    @Test("Events are written byte for byte as JSONEncoder writes them")
    func eventsMatchJSONEncoder() throws {
        var random = SeededGenerator(seed: 0xE7E27)
        let encoder = JSONEncoder.ringRelay
        for index in 0..<2_000 {
            let event = Self.randomEvent(using: &random)
            let expected = String(decoding: try encoder.encode(event), as: UTF8.self)
            #expect(event.jsonText == expected, "case \(index)")
            if event.jsonText != expected { break }
        }
    }

    @Test("Call resources, call pages, deliveries, webhook answers and invites are written byte for byte as JSONEncoder writes them")
    func resourcesMatchJSONEncoder() throws {
        var random = SeededGenerator(seed: 0xDE11)
        let encoder = JSONEncoder.ringRelay
        func check(_ value: some JSONTextEncodable, _ index: Int) throws -> Bool {
            let expected = String(decoding: try encoder.encode(value), as: UTF8.self)
            #expect(value.jsonText == expected, "case \(index)")
            return value.jsonText == expected
        }
        for index in 0..<2_000 {
            var event = Self.randomEvent(using: &random)
            event.call.deliveries = Self.maybe(&random) { random in
                (0..<Int.random(in: 0..<4, using: &random)).map { _ in Self.randomDelivery(using: &random) }
            }
            event.call.deliveriesNextCursor = Self.maybe(&random) { Self.randomString(using: &$0) }
            let deliveries = (0..<Int.random(in: 0..<4, using: &random)).map { _ in Self.randomDelivery(using: &random) }
            let webhook = WebhookRingResponse(
                callId: Self.randomString(using: &random), deliveries: deliveries,
                deliveriesNextCursor: Self.maybe(&random) { Self.randomString(using: &$0) })
            let invite = NativeInvite(
                v: Int.random(in: 0...2, using: &random), callId: Self.randomString(using: &random),
                from: Self.maybe(&random) {
                    .init(
                        identity: Self.randomString(using: &$0), displayName: Self.maybe(&$0) { Self.randomString(using: &$0) },
                        avatarUrl: Self.maybe(&$0) { Self.randomAvatarURL(using: &$0) })
                },
                media: Self.maybe(&random) { Self.randomString(using: &$0) }, sentAt: Self.randomDate(using: &random),
                expiresAt: Self.randomDate(using: &random), metadata: Self.maybe(&random) { Self.randomJSON(depth: 0, using: &$0) },
                calleeBusy: Self.maybe(&random) { Bool.random(using: &$0) }, sealed: Self.maybe(&random) { Self.randomString(using: &$0) })
            let page = CallList(
                data: (0..<Int.random(in: 0..<4, using: &random)).map { _ in Self.randomEvent(using: &random).call },
                nextCursor: Self.maybe(&random) { Self.randomString(using: &$0) })
            guard try check(event, index), try check(event.call, index), try check(webhook, index), try check(invite, index), try check(page, index)
            else { break }
        }
    }

    @Test("The caller's avatar is written where JSONEncoder writes it: in the invite's from, in the call beside displayName")
    func avatarGoldenText() throws {
        let date = Date(timeIntervalSince1970: 1_893_499_200)
        let invite = NativeInvite(
            callId: "call_1", from: .init(identity: "alice", displayName: "Alice", avatarUrl: "https://cdn.example.com/a/alice.png?s=64"),
            media: "audio", sentAt: date, expiresAt: date)
        #expect(
            invite.jsonText
                == #"{"callId":"call_1","expiresAt":"2030-01-01T12:00:00Z","from":{"avatarUrl":"https://cdn.example.com/a/alice.png?s=64","displayName":"Alice","identity":"alice"},"media":"audio","sentAt":"2030-01-01T12:00:00Z","v":1}"#
        )
        #expect(invite.jsonText == String(decoding: try JSONEncoder.ringRelay.encode(invite), as: UTF8.self))
        let call = CallResource(
            id: "call_1", source: "native", state: "ringing", from: "alice", displayName: "Alice", avatarUrl: "https://cdn.example.com/a.png",
            to: "bob", createdAt: date, ringEndsAt: date, updatedAt: date, answeredBy: "b1", deliveries: nil)
        #expect(
            call.jsonText
                == #"{"answeredBy":"b1","avatarUrl":"https://cdn.example.com/a.png","createdAt":"2030-01-01T12:00:00Z","displayName":"Alice","from":"alice","id":"call_1","media":"audio","ringEndsAt":"2030-01-01T12:00:00Z","source":"native","state":"ringing","to":"bob","updatedAt":"2030-01-01T12:00:00Z"}"#
        )
        #expect(try JSONDecoder.ringRelay.decode(CallResource.self, from: Data(call.jsonText.utf8)) == call)
    }

    @Test("Device frames: what the fast parser reads, JSONDecoder reads the same; the usual frames are read")
    func deviceFramesMatchJSONDecoder() throws {
        var random = SeededGenerator(seed: 0xF4A5E)
        let decoder = JSONDecoder.ringRelay
        var recognised = 0
        for index in 0..<4_000 {
            let frame = Self.randomDeviceFrame(using: &random)
            let canonical = Array(try JSONEncoder.ringRelay.encode(frame))
            let canonicalParse = DeviceFrame(fastParsing: canonical)
            let plainIDs = Self.isPlain(frame)
            #expect(!plainIDs || canonicalParse == frame, "case \(index): \(String(decoding: canonical, as: UTF8.self))")
            let bytes = Self.mutate(canonical, using: &random)
            guard let fast = DeviceFrame(fastParsing: bytes) else { continue }
            recognised += 1
            let slow = try? decoder.decode(DeviceFrame.self, from: Data(bytes))
            #expect(fast == slow, "case \(index): \(String(decoding: bytes, as: UTF8.self))")
        }
        #expect(recognised > 400, "the fast parser should read most plain frames")
    }

    @Test("Hand-picked device frames")
    func handPicked() {
        #expect(DeviceFrame(fastParsing: Array(#" { "eventId" : "evt_1" ,"type":"ack" } "#.utf8)) == .ack(eventId: "evt_1"))
        #expect(DeviceFrame(fastParsing: Array(#"{"type":"ping"}"#.utf8)) == .ping)
        #expect(DeviceFrame(fastParsing: Array(#"{"type":"reject","callId":"call_é"}"#.utf8)) == .reject(callId: "call_é"))
        // Left to JSONDecoder: escapes, unknown or repeated keys, missing members, other value types, trailing bytes.
        for text in [
            #"{"type":"ack","eventId":"evt\u005f1"}"#, #"{"type":"ack","eventId":"e","x":"y"}"#, #"{"type":"ack","type":"ack","eventId":"e"}"#,
            #"{"type":"ack"}"#, #"{"type":"accept","callId":1}"#, #"{"type":"ping"}x"#, #"{"type":"ping""#, "", "{}", #"{"type":"hello"}"#,
        ] {
            #expect(DeviceFrame(fastParsing: Array(text.utf8)) == nil, "\(text)")
        }
    }

    @Test("JSON values: what the fast reader reads, JSONDecoder reads the same")
    func jsonValuesMatchJSONDecoder() throws {
        var random = SeededGenerator(seed: 0x15_0A)
        var recognised = 0
        for index in 0..<3_000 {
            let value = Self.randomJSON(depth: 0, using: &random)
            let canonical = Array(try JSONEncoder.ringRelay.encode(value))
            let bytes = index.isMultiple(of: 2) ? canonical : Self.mutate(canonical, using: &random)
            guard let fast = JSONValue(parsing: bytes) else { continue }
            recognised += 1
            let slow = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
            #expect(fast == slow, "case \(index): \(String(decoding: bytes, as: UTF8.self))")
        }
        #expect(recognised > 1_000, "the fast reader should read most values")
        #expect(JSONValue(parsing: Array(#" {"t" : 1763880000123456789, "a":[true,null,-0.5e3]} "#.utf8))
            == .object(["t": .number(1_763_880_000_123_456_789), "a": .array([.bool(true), .null, .number(-500)])]))
        for text in ["01", "1.", "-", "1e", "[1,]", #"{"a":1,"a":2}"#, "1e999", #""\n""#, "tru", "[", "{}x"] {
            #expect(JSONValue(parsing: Array(text.utf8)) == nil, "\(text)")
        }
    }

    @Test("Calls bodies: what the fast reader reads, JSONDecoder reads the same; the usual bodies are read")
    func callBodiesMatchJSONDecoder() throws {
        var random = SeededGenerator(seed: 0xCA11)
        let decoder = JSONDecoder.ringRelay
        var recognised = 0
        for index in 0..<3_000 {
            // Half the bodies use plain strings, as apps do; the rest any string at all.
            let text: (inout SeededGenerator) -> String = index % 4 < 2 ? { Self.plainString(using: &$0) } : { Self.randomString(using: &$0) }
            let body = CreateCallRequest(
                from: Self.maybe(&random, text), to: text(&random), media: Self.maybe(&random) { ["audio", "video", text(&$0)].randomElement(using: &$0)! },
                ringTimeoutSeconds: Self.maybe(&random) { Int.random(in: -10...1_000, using: &$0) },
                metadata: Self.maybe(&random) { index % 4 < 2 ? .object(["t": .number(Double(Int.random(in: 0...1 << 60, using: &$0)))]) : Self.randomJSON(depth: 0, using: &$0) },
                displayName: Self.maybe(&random, text),
                avatarUrl: Self.maybe(&random) { index % 4 < 2 ? Self.randomAvatarURL(using: &$0) : text(&$0) })
            let canonical = Array(try JSONEncoder.ringRelay.encode(body))
            let bytes = index.isMultiple(of: 2) ? canonical : Self.mutate(canonical, using: &random)
            guard let fast = CreateCallRequest(fastParsing: bytes) else { continue }
            recognised += 1
            let slow = try? decoder.decode(CreateCallRequest.self, from: Data(bytes))
            #expect(fast == slow, "case \(index): \(String(decoding: bytes, as: UTF8.self))")
            // What the store keeps of the metadata is what JSONEncoder would write.
            if let metadata = fast.metadata {
                #expect(metadata.jsonText == String(decoding: try JSONEncoder.ringRelay.encode(metadata), as: UTF8.self), "case \(index)")
            }
        }
        #expect(recognised > 500, "the fast reader should read most plain bodies")
        let withAvatar = #"{"to":"bob","displayName":"Alice","avatarUrl":"https://cdn.example.com/a/alice.png?s=64"}"#
        #expect(
            CreateCallRequest(fastParsing: Array(withAvatar.utf8))
                == CreateCallRequest(to: "bob", displayName: "Alice", avatarUrl: "https://cdn.example.com/a/alice.png?s=64"))
        // Left to JSONDecoder: sealed invites, wrong types, unknown fields, a missing callee.
        for text in [
            #"{"to":"bob","sealed":[]}"#, #"{"to":1}"#, #"{"to":"bob","ringTimeoutSeconds":4.5}"#, #"{"to":"bob","ringTimeoutSeconds":"45"}"#,
            #"{"to":"bob","colour":"red"}"#, #"{"from":"alice"}"#, #"{"to":null}"#, #"["to"]"#, #"{"to":"bob","avatarUrl":1}"#,
        ] {
            #expect(CreateCallRequest(fastParsing: Array(text.utf8)) == nil, "\(text)")
        }
    }

    // MARK: Generators

    private static func isPlain(_ frame: DeviceFrame) -> Bool {
        let id: String? =
            switch frame {
            case .ack(let eventId): eventId
            case .accept(let id), .reject(let id), .cancel(let id), .end(let id): id
            case .ping: nil
            }
        return id.map { !$0.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") } } ?? true
    }

    private static func randomDeviceFrame(using random: inout SeededGenerator) -> DeviceFrame {
        let id = randomString(using: &random)
        switch Int.random(in: 0..<6, using: &random) {
        case 0: return .ack(eventId: id)
        case 1: return .accept(callId: id)
        case 2: return .reject(callId: id)
        case 3: return .cancel(callId: id)
        case 4: return .end(callId: id)
        default: return .ping
        }
    }

    /// Whitespace, a dropped or changed byte, a cut, an extra member — or nothing.
    private static func mutate(_ bytes: [UInt8], using random: inout SeededGenerator) -> [UInt8] {
        var bytes = bytes
        guard !bytes.isEmpty else { return bytes }
        switch Int.random(in: 0..<7, using: &random) {
        case 0: bytes.insert([0x20, 0x0A, 0x09, 0x0D].randomElement(using: &random)!, at: Int.random(in: 0...bytes.count, using: &random))
        case 1: bytes.remove(at: Int.random(in: 0..<bytes.count, using: &random))
        case 2: bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
        case 3: bytes.removeLast(Int.random(in: 0..<bytes.count, using: &random))
        case 4: bytes.insert(contentsOf: Array(#""callId":"c","#.utf8), at: 1)
        case 5: bytes.insert(contentsOf: Array(#""eventId":"e","#.utf8), at: 1)
        default: break
        }
        return bytes
    }

    private static func randomString(using random: inout SeededGenerator) -> String {
        let alphabet: [String] = ["a", "Z", "_", "0", "9", "/", "\"", "\\", "\n", "\t", "\u{01}", "\u{1F}", "é", "€", "😀", " ", "<", "\u{7F}", "\u{2028}"]
        let length = Int.random(in: 0..<12, using: &random)
        return (0..<length).map { _ in alphabet.randomElement(using: &random)! }.joined()
    }

    /// An avatar URL as apps send them (slashes, a query), or now and then one with characters
    /// the coder must escape.
    private static func randomAvatarURL(using random: inout SeededGenerator) -> String {
        let path = (0..<Int.random(in: 0..<3, using: &random)).map { _ in plainString(using: &random) }.joined(separator: "/")
        let url = "https://cdn.example.com/" + path + (Bool.random(using: &random) ? "?s=128&v=2" : "")
        return Int.random(in: 0..<8, using: &random) == 0 ? url + randomString(using: &random) : url
    }

    private static func plainString(using random: inout SeededGenerator) -> String {
        let alphabet: [String] = ["a", "Z", "_", "0", "-", "/", " ", "é", "😀", "+"]
        return (0..<Int.random(in: 1..<12, using: &random)).map { _ in alphabet.randomElement(using: &random)! }.joined()
    }

    private static func randomDate(using random: inout SeededGenerator) -> Date {
        Date(timeIntervalSince1970: Double.random(in: -3_000_000_000...5_000_000_000, using: &random).rounded(toPlaces: Int.random(in: 0...3, using: &random)))
    }

    private static func maybe<T>(_ random: inout SeededGenerator, _ value: (inout SeededGenerator) -> T) -> T? {
        Bool.random(using: &random) ? value(&random) : nil
    }

    private static func randomJSON(depth: Int, using random: inout SeededGenerator) -> JSONValue {
        switch Int.random(in: 0..<(depth > 2 ? 4 : 6), using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2:
            let numbers: [Double] = [
                0, -0.0, 1, -1, 3.5, 1e-7, 123_456_789, 1e21, 1.0e300, 0.1, Double(Int.random(in: -1_000_000...1_000_000, using: &random)),
                Double.random(in: -1e6...1e6, using: &random), 9_007_199_254_740_993,
            ]
            return .number(numbers.randomElement(using: &random)!)
        case 3: return .string(randomString(using: &random))
        case 4: return .array((0..<Int.random(in: 0..<4, using: &random)).map { _ in randomJSON(depth: depth + 1, using: &random) })
        default:
            var object: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0..<4, using: &random) { object[randomString(using: &random)] = randomJSON(depth: depth + 1, using: &random) }
            return .object(object)
        }
    }

    private static func randomDelivery(using random: inout SeededGenerator) -> DeliveryResource {
        DeliveryResource(
            id: randomString(using: &random), bindingId: maybe(&random) { randomString(using: &$0) }, deviceId: maybe(&random) { randomString(using: &$0) },
            channel: ["apns", "fcm", "websocket"].randomElement(using: &random)!, kind: randomString(using: &random),
            outcome: randomString(using: &random), status: maybe(&random) { Int.random(in: -1...600, using: &$0) },
            reason: maybe(&random) { randomString(using: &$0) }, pushId: maybe(&random) { randomString(using: &$0) },
            attempts: Int.random(in: 0...5, using: &random),
            latencyMs: maybe(&random) { [0, 0.5, 12.345, 1e-7, 1e21, Double.random(in: 0...10_000, using: &$0).rounded(toPlaces: 3)].randomElement(using: &$0)! },
            createdAt: randomDate(using: &random), completedAt: maybe(&random) { randomDate(using: &$0) })
    }

    static func randomEvent(using random: inout SeededGenerator) -> CallEvent {
        let call = CallResource(
            id: randomString(using: &random), source: ["native", "twilio", "webex"].randomElement(using: &random)!,
            state: ["ringing", "accepted"].randomElement(using: &random)!, from: maybe(&random) { randomString(using: &$0) },
            displayName: maybe(&random) { randomString(using: &$0) }, avatarUrl: maybe(&random) { randomAvatarURL(using: &$0) },
            to: randomString(using: &random),
            media: ["audio", "video"].randomElement(using: &random)!, metadata: maybe(&random) { randomJSON(depth: 0, using: &$0) },
            createdAt: randomDate(using: &random), ringEndsAt: randomDate(using: &random), updatedAt: randomDate(using: &random),
            answeredAt: maybe(&random) { randomDate(using: &$0) }, answeredBy: maybe(&random) { randomString(using: &$0) },
            endedAt: maybe(&random) { randomDate(using: &$0) }, endReason: maybe(&random) { randomString(using: &$0) },
            endedBy: maybe(&random) { randomString(using: &$0) }, durationSeconds: maybe(&random) { Int.random(in: 0...100_000, using: &$0) },
            deliveries: nil)
        return CallEvent(
            type: CallEventType.allCases.randomElement(using: &random)!, eventId: randomString(using: &random), callId: randomString(using: &random),
            call: call, sentAt: randomDate(using: &random), reason: maybe(&random) { randomString(using: &$0) },
            calleeBusy: maybe(&random) { Bool.random(using: &$0) }, provider: maybe(&random) { randomString(using: &$0) },
            payload: maybe(&random) { randomJSON(depth: 0, using: &$0) })
    }
}

extension Double {
    fileprivate func rounded(toPlaces places: Int) -> Double {
        let scale = pow(10, Double(places))
        return (self * scale).rounded() / scale
    }
}
