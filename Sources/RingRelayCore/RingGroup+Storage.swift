import Foundation

extension RingGroup {
    /// One participant as the stores keep it: times in whole milliseconds, like every other column.
    private struct StoredParticipant: Codable {
        var identity: String
        var state: String
        var answeredBy: String?
        var answeredAt: Int?
        var endedAt: Int?
    }

    /// The participants as the stores keep them: a JSON array, in the caller's order.
    package var storedParticipants: String {
        let rows = members.map {
            StoredParticipant(
                identity: $0.identity, state: $0.state.rawValue, answeredBy: $0.answeredBy, answeredAt: $0.answeredAt?.millis,
                endedAt: $0.endedAt?.millis)
        }
        // Strings, integers and optionals: encoding cannot fail.
        return String(decoding: (try? JSONEncoder().encode(rows)) ?? Data("[]".utf8), as: UTF8.self)
    }

    /// A group read back from a store.
    /// - Throws: `store_corrupt` for text ``storedParticipants`` did not write.
    package init(mode: RingMode, storedParticipants text: String) throws {
        let rows: [StoredParticipant]
        do {
            rows = try JSONDecoder().decode([StoredParticipant].self, from: Data(text.utf8))
        } catch {
            throw RingRelayError(.internal, code: .storeCorrupt, "A stored ring group's participants are unreadable.")
        }
        let members = try rows.map { row in
            guard let state = ParticipantState(rawValue: row.state) else {
                throw RingRelayError(.internal, code: .storeCorrupt, "A stored ring group participant has an unknown state.")
            }
            return CallParticipant(
                identity: row.identity, state: state, answeredBy: row.answeredBy, answeredAt: row.answeredAt.map(Date.init(millis:)),
                endedAt: row.endedAt.map(Date.init(millis:)))
        }
        self.init(mode: mode, members: members)
    }
}
