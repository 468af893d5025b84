import Foundation
import RingRelayCore
import RingRelayWire
import Testing

/// The call rules as pure functions: roles, states, the ring deadline, and who hears what.
@Suite struct CallRulesTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    static func call(_ state: CallState = .ringing, source: CallSource = .native, deadline: TimeInterval = 45) -> Call {
        Call(
            id: "call_1", accountID: "acc_1", source: source, caller: source == .native ? "alice" : "client:alice", callee: "bob",
            state: state, externalID: nil, createdAt: now, ringDeadline: now.addingTimeInterval(deadline), updatedAt: now)
    }

    static let bob1 = CallActor(identity: "bob", deviceID: "b1")
    static let alice = CallActor(identity: "alice", deviceID: "a1")
    static let carol = CallActor(identity: "carol", deviceID: "c1")
    static let account = CallActor(identity: nil, deviceID: nil)

    func code(_ body: () throws -> CallChange) -> String? {
        failure(body)?.code
    }

    func failure(_ body: () throws -> CallChange) -> RingRelayError? {
        do {
            _ = try body()
            return nil
        } catch {
            return error as? RingRelayError
        }
    }

    @Test func rolesDecideWhoMayDoWhat() {
        let ringing = Self.call()
        #expect(code { try CallRules.change(for: .accept, on: ringing, by: Self.bob1, at: Self.now) } == nil)
        #expect(code { try CallRules.change(for: .reject, on: ringing, by: Self.bob1, at: Self.now) } == nil)
        #expect(code { try CallRules.change(for: .cancel, on: ringing, by: Self.alice, at: Self.now) } == nil)
        #expect(code { try CallRules.change(for: .accept, on: ringing, by: Self.account, at: Self.now) } == nil)
        #expect(code { try CallRules.change(for: .accept, on: ringing, by: Self.alice, at: Self.now) } == "forbidden")
        #expect(code { try CallRules.change(for: .cancel, on: ringing, by: Self.bob1, at: Self.now) } == "forbidden")
        // A stranger may not learn the call exists.
        for command in CallCommand.allCases {
            #expect(code { try CallRules.change(for: command, on: ringing, by: Self.carol, at: Self.now) } == "call_not_found")
        }
        // A provider call's caller is not an identity of the account, and its provider cancels it.
        let twilio = Self.call(source: .twilio)
        #expect(code { try CallRules.change(for: .accept, on: twilio, by: CallActor(identity: "client:alice", deviceID: "x"), at: Self.now) } == "call_not_found")
        #expect(code { try CallRules.change(for: .cancel, on: twilio, by: Self.account, at: Self.now) } == "call_not_cancellable")
    }

    @Test func statesDecideWhatIsStillPossible() throws {
        for state in CallState.allCases where state != .ringing {
            let error = failure { try CallRules.change(for: .accept, on: Self.call(state), by: Self.bob1, at: Self.now) }
            #expect(error?.code == "call_not_ringing")
            #expect(error?.state == state.rawValue)
            #expect(error?.kind == .conflict)
        }
        #expect(code { try CallRules.change(for: .end, on: Self.call(.ringing), by: Self.alice, at: Self.now) } == "call_not_active")
        let end = try CallRules.change(for: .end, on: Self.call(.accepted), by: Self.bob1, at: Self.now)
        #expect(end.from == [.accepted])
        #expect(end.to == .ended)
        #expect(end.endReason == .hangup)
        #expect(end.endedBy == "bob")
    }

    @Test func aRingPastItsDeadlineIsMissed() throws {
        let late = Self.now.addingTimeInterval(46)
        let error = failure { try CallRules.change(for: .accept, on: Self.call(), by: Self.bob1, at: late) }
        #expect(error?.state == "missed")
        // In time, the change itself also carries the deadline, for the store to check atomically.
        let accept = try CallRules.change(for: .accept, on: Self.call(), by: Self.bob1, at: Self.now)
        #expect(accept.beforeDeadline)
        #expect(accept.answeredBy == "b1")
        let timeout = CallRules.timeout(Self.call(), at: late)
        #expect(timeout.from == [.ringing])
        #expect(timeout.to == .missed)
        #expect(timeout.endReason == .unanswered)
    }

    @Test func everyChangeTellsTheRightDevices() {
        func events(_ state: CallState, acting: String? = "b1", source: CallSource = .native, answeredBy: String? = nil) -> [String] {
            var call = Self.call(state, source: source)
            call.answeredBy = answeredBy
            return CallRules.events(after: call, actingDevice: acting).map { event in
                let devices =
                    switch event.devices {
                    case .all: "*"
                    case .only(let device): device
                    case .allExcept(let device): "!" + device
                    }
                return "\(event.kind.rawValue)→\(event.identity)/\(devices)/\(event.reason ?? "-")"
            }
        }
        #expect(
            events(.accepted) == [
                "call.accepted→bob/b1/-", "call.answered_elsewhere→bob/!b1/answered_elsewhere", "call.accepted→alice/*/-",
            ])
        #expect(
            events(.rejected) == [
                "call.rejected→bob/b1/declined", "call.declined_elsewhere→bob/!b1/declined_elsewhere", "call.rejected→alice/*/declined",
            ])
        #expect(events(.cancelled, acting: "a1") == ["call.cancelled→bob/*/cancelled", "call.cancelled→alice/*/cancelled"])
        #expect(events(.missed, acting: nil) == ["call.missed→bob/*/unanswered", "call.ended→alice/*/unanswered"])
        // The end reaches only the devices in the call: the caller's and the one that answered
        // (the callee's others were told answered_elsewhere, their one ending).
        #expect(events(.ended, answeredBy: "b1") == ["call.ended→bob/b1/hangup", "call.ended→alice/*/hangup"])
        #expect(events(.ended, acting: "a1", answeredBy: "b2") == ["call.ended→bob/b2/hangup", "call.ended→alice/*/hangup"])
        #expect(events(.ended, acting: nil, answeredBy: nil) == ["call.ended→alice/*/hangup"])
        // An account accepting for nobody in particular: every callee device was answered elsewhere.
        #expect(events(.accepted, acting: nil) == ["call.answered_elsewhere→bob/*/answered_elsewhere", "call.accepted→alice/*/-"])
        // Provider calls have no caller identity to tell.
        #expect(events(.missed, acting: nil, source: .twilio) == ["call.missed→bob/*/unanswered"])
    }
}
