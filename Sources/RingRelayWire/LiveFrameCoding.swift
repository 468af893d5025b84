import Foundation

// Hand-written coding for what every call sends and reads: live events, acks and commands, the
// calls body and the call resource answering it (alone, or a page of them), the invite inside a push. Foundation's
// JSONEncoder and JSONDecoder cost tens of microseconds for each. Both paths give exactly what the
// Codable conformances give (tests compare them byte for byte); anything unusual goes to the
// Codable path, which also words the errors.

/// A value that can write itself as JSON text exactly as `JSONEncoder.ringRelay` encodes it.
public protocol JSONTextEncodable: Encodable {
    /// The value as `JSONEncoder.ringRelay` writes it (sorted keys, RFC 3339 dates, slashes as
    /// they are).
    var jsonText: String { get }
}

extension DeviceFrame {
    /// Reads a device frame written the usual way: one JSON object of the frame's own keys with
    /// string values without escapes (read by ``JSONValue/init(parsing:)``). `nil` means "not
    /// recognised here", never "invalid": decode it with `JSONDecoder` then, which accepts every
    /// valid frame and explains the invalid ones.
    public init?(fastParsing bytes: some Collection<UInt8>) {
        guard case .object(let object) = JSONValue(parsing: bytes), object.keys.allSatisfy(Self.fastKeys.contains) else { return nil }
        var members: [String: String] = [:]
        for (key, value) in object {
            guard case .string(let string) = value else { return nil }
            members[key] = string
        }
        guard let type = members["type"] else { return nil }
        func callId() -> String? { members["callId"] }
        switch type {
        case "ack":
            guard let eventId = members["eventId"] else { return nil }
            self = .ack(eventId: eventId)
        case "accept":
            guard let id = callId() else { return nil }
            self = .accept(callId: id)
        case "reject":
            guard let id = callId() else { return nil }
            self = .reject(callId: id)
        case "cancel":
            guard let id = callId() else { return nil }
            self = .cancel(callId: id)
        case "end":
            guard let id = callId() else { return nil }
            self = .end(callId: id)
        case "ping": self = .ping
        default: return nil
        }
    }

    private static let fastKeys: Set<String> = ["type", "eventId", "callId"]
}

extension CallEvent: JSONTextEncodable {
    public var jsonText: String {
        var out = JSONText(capacity: 512)
        out.object { members in
            members.member("call") { $0.callResource(call) }
            members.member("callId") { $0.string(callId) }
            if let calleeBusy { members.member("calleeBusy") { $0.raw(calleeBusy ? "true" : "false") } }
            members.member("eventId") { $0.string(eventId) }
            if let payload { members.member("payload") { $0.value(payload) } }
            if let provider { members.member("provider") { $0.string(provider) } }
            if let participant { members.member("participant") { $0.string(participant) } }
            if let reason { members.member("reason") { $0.string(reason) } }
            if let sealed { members.member("sealed") { $0.string(sealed) } }
            members.member("sentAt") { $0.date(sentAt) }
            members.member("type") { $0.string(type.rawValue) }
        }
        return out.text
    }
}

extension CallResource: JSONTextEncodable {
    public var jsonText: String {
        // Room for every delivery up front: a call to 10,000 devices answers with megabytes, and
        // growing the text by doubling copied it a dozen times into freshly faulted pages.
        var out = JSONText(capacity: 512 + 320 * (deliveries?.count ?? 0))
        out.callResource(self)
        return out.text
    }
}

extension CallList: JSONTextEncodable {
    public var jsonText: String {
        var out = JSONText(capacity: 64 + 512 * data.count)
        out.object { members in
            members.member("data") { $0.array(data) { $0.callResource($1) } }
            if let nextCursor { members.member("nextCursor") { $0.string(nextCursor) } }
        }
        return out.text
    }
}

extension WebhookRingResponse: JSONTextEncodable {
    public var jsonText: String {
        var out = JSONText(capacity: 128 + 256 * deliveries.count)
        out.object { members in
            members.member("callId") { $0.string(callId) }
            members.member("deliveries") { $0.array(deliveries) { $0.deliveryResource($1) } }
            if let deliveriesNextCursor { members.member("deliveriesNextCursor") { $0.string(deliveriesNextCursor) } }
        }
        return out.text
    }
}

extension NativeInvite: JSONTextEncodable {
    public var jsonText: String {
        var out = JSONText(capacity: 256)
        out.object { members in
            members.member("callId") { $0.string(callId) }
            if let calleeBusy { members.member("calleeBusy") { $0.raw(calleeBusy ? "true" : "false") } }
            members.member("expiresAt") { $0.date(expiresAt) }
            if let from {
                members.member("from") { out in
                    out.object { caller in
                        if let avatarUrl = from.avatarUrl { caller.member("avatarUrl") { $0.string(avatarUrl) } }
                        if let displayName = from.displayName { caller.member("displayName") { $0.string(displayName) } }
                        caller.member("identity") { $0.string(from.identity) }
                    }
                }
            }
            if let media { members.member("media") { $0.string(media) } }
            if let metadata { members.member("metadata") { $0.value(metadata) } }
            if let sealed { members.member("sealed") { $0.string(sealed) } }
            members.member("sentAt") { $0.date(sentAt) }
            members.member("v") { $0.raw(String(v)) }
        }
        return out.text
    }
}

/// A JSON writer for the few shapes above (and the server's JSON log lines).
package struct JSONText {
    package private(set) var text = ""

    package init(capacity: Int = 0) {
        text.reserveCapacity(capacity)
    }

    package mutating func raw(_ fragment: String) {
        text += fragment
    }

    package struct Members {
        fileprivate var out: JSONText
        fileprivate var first = true

        package mutating func member(_ key: String, _ value: (inout JSONText) -> Void) {
            if !first { out.text += "," }
            first = false
            out.string(key)
            out.text += ":"
            value(&out)
        }
    }

    package mutating func object(_ body: (inout Members) -> Void) {
        // The text moves into the member writer and back, so it is never copied.
        var members = Members(out: self)
        self = JSONText()
        members.out.text += "{"
        body(&members)
        members.out.text += "}"
        self = members.out
    }

    package mutating func string(_ value: String) {
        // Most strings (ids, names, kinds) need no escape: appended whole, in one piece.
        var value = value
        if !value.withUTF8({ $0.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") } }) {
            text += "\""
            text += value
            text += "\""
            return
        }
        text += "\""
        var plainStart = value.utf8.startIndex
        var index = plainStart
        let utf8 = value.utf8
        while index < utf8.endIndex {
            let byte = utf8[index]
            let escape: String?
            switch byte {
            case UInt8(ascii: "\""): escape = "\\\""
            case UInt8(ascii: "\\"): escape = "\\\\"
            case 0x08: escape = "\\b"
            case 0x0C: escape = "\\f"
            case 0x0A: escape = "\\n"
            case 0x0D: escape = "\\r"
            case 0x09: escape = "\\t"
            case 0..<0x20: escape = "\\u00" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)
            default: escape = nil
            }
            if let escape {
                text += Substring(utf8[plainStart..<index])
                text += escape
                plainStart = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        text += Substring(utf8[plainStart..<utf8.endIndex])
        text += "\""
    }

    /// `yyyy-MM-ddTHH:mm:ssZ` in UTC, whole seconds, as `.iso8601` writes it; with `milliseconds`,
    /// `yyyy-MM-ddTHH:mm:ss.SSSZ`.
    package mutating func date(_ date: Date, milliseconds: Bool = false) {
        let totalMilliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let seconds = totalMilliseconds >= 0 ? totalMilliseconds / 1000 : (totalMilliseconds - 999) / 1000
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        // Written as bytes: a string per field cost more than the arithmetic (a date is in every
        // delivery of every answer).
        var out: [UInt8] = []
        out.reserveCapacity(32)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value / divisor % 10))
                divisor /= 10
            }
        }
        out.append(UInt8(ascii: "\""))
        if (0...9999).contains(year) {
            digits(year, 4)
        } else {
            let yearText = String(year)
            out += repeatElement(UInt8(ascii: "0"), count: max(0, 4 - yearText.utf8.count))
            out += yearText.utf8
        }
        out.append(UInt8(ascii: "-"))
        digits(month, 2)
        out.append(UInt8(ascii: "-"))
        digits(day, 2)
        out.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3600, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        if milliseconds {
            out.append(UInt8(ascii: "."))
            digits(totalMilliseconds - seconds * 1000, 3)
        }
        out.append(UInt8(ascii: "Z"))
        out.append(UInt8(ascii: "\""))
        text += String(decoding: out, as: UTF8.self)
    }

    package mutating func value(_ value: JSONValue) {
        switch value {
        case .null: text += "null"
        case .bool(let flag): text += flag ? "true" : "false"
        case .number(let number): self.number(number)
        case .string(let string): self.string(string)
        case .array(let elements): array(elements) { $0.value($1) }
        case .object(let members):
            object { writer in
                for key in members.keys.sorted() {
                    writer.member(key) { $0.value(members[key]!) }
                }
            }
        }
    }

    /// As `JSONEncoder` writes a `Double`: its shortest form, without a trailing `.0`.
    mutating func number(_ number: Double) {
        var description = number.description
        if description.hasSuffix(".0") { description.removeLast(2) }
        text += description
    }

    mutating func callResource(_ call: CallResource) {
        object { members in
            if let answeredAt = call.answeredAt { members.member("answeredAt") { $0.date(answeredAt) } }
            if let answeredBy = call.answeredBy { members.member("answeredBy") { $0.string(answeredBy) } }
            if let avatarUrl = call.avatarUrl { members.member("avatarUrl") { $0.string(avatarUrl) } }
            members.member("createdAt") { $0.date(call.createdAt) }
            if let deliveries = call.deliveries { members.member("deliveries") { $0.array(deliveries) { $0.deliveryResource($1) } } }
            if let cursor = call.deliveriesNextCursor { members.member("deliveriesNextCursor") { $0.string(cursor) } }
            if let displayName = call.displayName { members.member("displayName") { $0.string(displayName) } }
            if let durationSeconds = call.durationSeconds { members.member("durationSeconds") { $0.raw(String(durationSeconds)) } }
            if let endReason = call.endReason { members.member("endReason") { $0.string(endReason) } }
            if let endedAt = call.endedAt { members.member("endedAt") { $0.date(endedAt) } }
            if let endedBy = call.endedBy { members.member("endedBy") { $0.string(endedBy) } }
            if let from = call.from { members.member("from") { $0.string(from) } }
            members.member("id") { $0.string(call.id) }
            members.member("media") { $0.string(call.media) }
            if let metadata = call.metadata { members.member("metadata") { $0.value(metadata) } }
            if let mode = call.mode { members.member("mode") { $0.string(mode) } }
            if let notifyMissed = call.notifyMissed { members.member("notifyMissed") { $0.raw(notifyMissed ? "true" : "false") } }
            if let participants = call.participants { members.member("participants") { $0.array(participants) { $0.participant($1) } } }
            members.member("ringEndsAt") { $0.date(call.ringEndsAt) }
            if let sealed = call.sealed { members.member("sealed") { $0.raw(sealed ? "true" : "false") } }
            members.member("source") { $0.string(call.source) }
            members.member("state") { $0.string(call.state) }
            members.member("to") { $0.string(call.to) }
            members.member("updatedAt") { $0.date(call.updatedAt) }
        }
    }

    mutating func participant(_ participant: CallParticipantResource) {
        object { members in
            if let answeredAt = participant.answeredAt { members.member("answeredAt") { $0.date(answeredAt) } }
            if let answeredBy = participant.answeredBy { members.member("answeredBy") { $0.string(answeredBy) } }
            if let endedAt = participant.endedAt { members.member("endedAt") { $0.date(endedAt) } }
            members.member("identity") { $0.string(participant.identity) }
            members.member("state") { $0.string(participant.state) }
        }
    }

    mutating func deliveryResource(_ delivery: DeliveryResource) {
        object { members in
            members.member("attempts") { $0.raw(String(delivery.attempts)) }
            if let bindingId = delivery.bindingId { members.member("bindingId") { $0.string(bindingId) } }
            members.member("channel") { $0.string(delivery.channel) }
            if let completedAt = delivery.completedAt { members.member("completedAt") { $0.date(completedAt) } }
            members.member("createdAt") { $0.date(delivery.createdAt) }
            if let deviceId = delivery.deviceId { members.member("deviceId") { $0.string(deviceId) } }
            members.member("id") { $0.string(delivery.id) }
            members.member("kind") { $0.string(delivery.kind) }
            if let latencyMs = delivery.latencyMs { members.member("latencyMs") { $0.number(latencyMs) } }
            members.member("outcome") { $0.string(delivery.outcome) }
            if let pushId = delivery.pushId { members.member("pushId") { $0.string(pushId) } }
            if let reason = delivery.reason { members.member("reason") { $0.string(reason) } }
            if let status = delivery.status { members.member("status") { $0.raw(String(status)) } }
        }
    }

    mutating func array<Element>(_ elements: [Element], _ write: (inout JSONText, Element) -> Void) {
        text += "["
        for (offset, element) in elements.enumerated() {
            if offset > 0 { text += "," }
            write(&self, element)
        }
        text += "]"
    }
}

extension JSONValue {
    /// Reads JSON text as `JSONDecoder` reads a `JSONValue`, without it: for call metadata, which
    /// the store keeps as text and every event and response carries. `nil` means "not read here"
    /// (invalid JSON, or a number, escape or duplicate key left to `JSONDecoder`), not "invalid".
    public init?(parsing bytes: some Collection<UInt8>) {
        guard let value = bytes.withContiguousStorageIfAvailable(Self.parseDocument) ?? Array(bytes).withUnsafeBufferPointer(Self.parseDocument)
        else { return nil }
        self = value
    }

    private static func parseDocument(_ bytes: UnsafeBufferPointer<UInt8>) -> JSONValue? {
        var reader = Reader(bytes: bytes)
        guard let value = reader.value(depth: 0) else { return nil }
        reader.skipSpace()
        return reader.index == bytes.count ? value : nil
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        mutating func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 { index += 1 }
        }

        mutating func literal(_ text: StaticString, _ value: JSONValue) -> JSONValue? {
            let count = text.utf8CodeUnitCount
            guard index + count <= bytes.count else { return nil }
            for offset in 0..<count where bytes[index + offset] != text.utf8Start[offset] { return nil }
            index += count
            return value
        }

        mutating func value(depth: Int) -> JSONValue? {
            skipSpace()
            guard index < bytes.count, depth < 64 else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "n"): return literal("null", .null)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "\""): return string().map(JSONValue.string)
            case UInt8(ascii: "["):
                index += 1
                var elements: [JSONValue] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(elements)
                }
                while true {
                    guard let element = value(depth: depth + 1) else { return nil }
                    elements.append(element)
                    skipSpace()
                    guard index < bytes.count else { return nil }
                    index += 1
                    if bytes[index - 1] == UInt8(ascii: "]") { return .array(elements) }
                    guard bytes[index - 1] == UInt8(ascii: ",") else { return nil }
                }
            case UInt8(ascii: "{"):
                index += 1
                var members: [String: JSONValue] = [:]
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                }
                while true {
                    skipSpace()
                    guard let key = string(), members[key] == nil else { return nil }
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                    index += 1
                    guard let member = value(depth: depth + 1) else { return nil }
                    members[key] = member
                    skipSpace()
                    guard index < bytes.count else { return nil }
                    index += 1
                    if bytes[index - 1] == UInt8(ascii: "}") { return .object(members) }
                    guard bytes[index - 1] == UInt8(ascii: ",") else { return nil }
                }
            default: return number()
            }
        }

        /// A string without escapes (those go to JSONDecoder), as valid UTF-8.
        mutating func string() -> String? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            index += 1
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                guard bytes[index] >= 0x20, bytes[index] != UInt8(ascii: "\\") else { return nil }
                index += 1
            }
            guard index < bytes.count else { return nil }
            defer { index += 1 }
            return String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        }

        /// A number in JSON's grammar that a `Double` holds finitely.
        mutating func number() -> JSONValue? {
            let start = index
            func digits() -> Int {
                let first = index
                while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
                return index - first
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            let integerStart = index
            let integerDigits = digits()
            guard integerDigits > 0, integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else { return nil }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits() > 0 else { return nil }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits() > 0 else { return nil }
            }
            guard let number = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)), number.isFinite
            else { return nil }
            return .number(number)
        }
    }
}

extension JSONValue: JSONTextEncodable {
    public var jsonText: String {
        var out = JSONText(capacity: 64)
        out.value(self)
        return out.text
    }
}

extension CreateCallRequest {
    /// Reads a `POST /v1/calls` body written the usual way, as its `Decodable` conformance would,
    /// without `JSONDecoder`. `nil` means "not read here" (sealed invites, a wrong type, an unknown
    /// field, anything unusual): decode with `JSONDecoder` then, which also words the error.
    public init?(fastParsing bytes: some Collection<UInt8>) {
        guard case .object(let members) = JSONValue(parsing: bytes),
            members.keys.allSatisfy(Self.fastKeys.contains),
            case .string(let to) = members["to"]
        else { return nil }
        /// An optional string member: absent or `null` is `nil`; another type is not read here.
        func string(_ key: String) -> String?? {
            switch members[key] {
            case nil, .null: .some(nil)
            case .string(let value): .some(value)
            default: nil
            }
        }
        guard let from = string("from"), let media = string("media"), let displayName = string("displayName"),
            let avatarUrl = string("avatarUrl"), let ifBusy = string("ifBusy")
        else { return nil }
        var ringTimeoutSeconds: Int?
        switch members["ringTimeoutSeconds"] {
        case nil, .null: break
        case .number(let number) where number.rounded() == number && abs(number) < 9_007_199_254_740_992:
            ringTimeoutSeconds = Int(number)
        default: return nil
        }
        let metadata: JSONValue? =
            switch members["metadata"] {
            case nil, .null: nil
            case let value?: value
            }
        self.init(
            from: from, to: [to], media: media, ringTimeoutSeconds: ringTimeoutSeconds, metadata: metadata, displayName: displayName,
            avatarUrl: avatarUrl, ifBusy: ifBusy)
    }

    private static let fastKeys: Set<String> = ["from", "to", "media", "ringTimeoutSeconds", "metadata", "displayName", "avatarUrl", "ifBusy"]
}
