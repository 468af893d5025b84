import Foundation
import RingRelayCore
import RingRelayWire
import Testing

/// The ring-group rules, pure: who hears what when each identity of a group answers, declines,
/// leaves, or is still ringing at the timeout, in both modes.
@Suite struct GroupCallRulesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func group(_ mode: RingMode, _ identities: [String] = ["bob", "carol", "dave"]) -> Call {
        Call(
            id: "call_1", accountID: "acc_1", source: .native, caller: "alice", callee: identities[0], state: .ringing, externalID: nil,
            createdAt: now, ringDeadline: now.addingTimeInterval(30), updatedAt: now,
            group: RingGroup(mode: mode, members: identities.map { CallParticipant(identity: $0) }))
    }

    func apply(_ command: CallCommand, _ call: Call, _ identity: String?, device: String? = nil, after seconds: TimeInterval = 1) throws
        -> GroupCallChange
    {
        try GroupCallRules.change(
            for: command, on: call, by: CallActor(identity: identity, deviceID: device), at: now.addingTimeInterval(seconds))
    }

    func states(_ call: Call) -> [String: ParticipantState] {
        Dictionary(uniqueKeysWithValues: (call.group?.members ?? []).map { ($0.identity, $0.state) })
    }

    func said(_ change: GroupCallChange) -> [String] {
        change.events.map { event in
            let devices =
                switch event.devices {
                case .all: "*"
                case .only(let device): device
                case .allExcept(let device): "!\(device)"
                }
            return "\(event.identity)/\(devices) \(event.kind.rawValue)" + (event.participant.map { " about \($0)" } ?? "")
        }
    }

    @Test func inModeFirstTheFirstAcceptWinsAndEveryOtherIdentityIsAnsweredElsewhere() throws {
        let accepted = try apply(.accept, group(.first), "carol", device: "c1")
        #expect(accepted.call.state == .accepted)
        #expect(accepted.call.answeredBy == "c1")
        #expect(states(accepted.call) == ["bob": .answeredElsewhere, "carol": .accepted, "dave": .answeredElsewhere])
        #expect(
            said(accepted) == [
                "carol/c1 call.accepted", "carol/!c1 call.answered_elsewhere", "alice/* call.accepted about carol",
                "bob/* call.answered_elsewhere", "dave/* call.answered_elsewhere",
            ])
        #expect(accepted.unanswered.isEmpty)

        // A second accept finds bob's part over.
        #expect(throws: RingRelayError.self) { try apply(.accept, accepted.call, "bob", device: "b1") }
        // Carol hangs up: the call is over for the devices in it, and only for them.
        let ended = try apply(.end, accepted.call, "carol", device: "c1", after: 60)
        #expect(ended.call.state == .ended)
        #expect(ended.call.endedBy == "carol")
        #expect(said(ended) == ["carol/c1 call.ended", "alice/* call.ended"])
    }

    @Test func inModeAllEachIdentityJoinsAndTheCallEndsWithTheLastOneOut() throws {
        let bob = try apply(.accept, group(.all), "bob", device: "b1")
        #expect(bob.call.state == .accepted)
        #expect(states(bob.call) == ["bob": .accepted, "carol": .ringing, "dave": .ringing])
        #expect(said(bob) == ["bob/b1 call.accepted", "bob/!b1 call.answered_elsewhere", "alice/* call.accepted about bob"])

        let carol = try apply(.accept, bob.call, "carol", device: "c2", after: 2)
        #expect(said(carol) == ["carol/c2 call.accepted", "carol/!c2 call.answered_elsewhere", "alice/* call.participant_updated about carol"])
        #expect(carol.call.answeredBy == "b1")  // the call's first answer stays

        let dave = try apply(.reject, carol.call, "dave", device: "d1", after: 3)
        #expect(dave.call.state == .accepted)
        #expect(said(dave) == ["dave/d1 call.rejected", "dave/!d1 call.declined_elsewhere", "alice/* call.participant_updated about dave"])

        let bobLeaves = try apply(.end, dave.call, "bob", device: "b1", after: 10)
        #expect(bobLeaves.call.state == .accepted)
        #expect(states(bobLeaves.call)["bob"] == .left)
        #expect(said(bobLeaves) == ["bob/b1 call.ended", "alice/* call.participant_updated about bob"])
        // Bob is out: he cannot hang up twice.
        #expect(throws: RingRelayError.self) { try apply(.end, bobLeaves.call, "bob", device: "b1", after: 11) }

        let carolLeaves = try apply(.end, bobLeaves.call, "carol", device: "c2", after: 12)
        #expect(carolLeaves.call.state == .ended)
        #expect(carolLeaves.call.endReason == .hangup)
        #expect(said(carolLeaves) == ["carol/c2 call.ended", "alice/* call.ended"])
    }

    @Test func theCallerEndingCancelsThoseStillRinging() throws {
        let bob = try apply(.accept, group(.all), "bob", device: "b1")
        let ended = try apply(.end, bob.call, "alice", device: "a1", after: 5)
        #expect(ended.call.state == .ended)
        #expect(states(ended.call) == ["bob": .accepted, "carol": .cancelled, "dave": .cancelled])
        #expect(said(ended) == ["bob/b1 call.ended", "carol/* call.cancelled", "dave/* call.cancelled", "alice/* call.ended"])
        #expect(ended.unanswered == ["carol", "dave"])
        // The account's key ends a call as its caller would.
        let byKey = try apply(.end, bob.call, nil, after: 5)
        #expect(byKey.call.state == .ended)
    }

    @Test func theTimeoutMissesOnlyThoseStillRinging() throws {
        // Nobody answered: the call is missed, as a call to one identity would be.
        let unanswered = try #require(GroupCallRules.timeout(group(.all), at: now.addingTimeInterval(31)))
        #expect(unanswered.call.state == .missed)
        #expect(said(unanswered) == ["bob/* call.missed", "carol/* call.missed", "dave/* call.missed", "alice/* call.ended"])
        #expect(unanswered.unanswered == ["bob", "carol", "dave"])

        // Bob answered: the others miss it, the caller hears who, and the call goes on.
        let bob = try apply(.accept, group(.all), "bob", device: "b1")
        let timedOut = try #require(GroupCallRules.timeout(bob.call, at: now.addingTimeInterval(31)))
        #expect(timedOut.call.state == .accepted)
        #expect(states(timedOut.call) == ["bob": .accepted, "carol": .missed, "dave": .missed])
        #expect(
            said(timedOut) == [
                "carol/* call.missed", "alice/* call.participant_updated about carol", "dave/* call.missed",
                "alice/* call.participant_updated about dave",
            ])
        #expect(GroupCallRules.timeout(timedOut.call, at: now.addingTimeInterval(32)) == nil)
        // Past the deadline nobody can join.
        #expect(throws: RingRelayError.self) { try apply(.accept, bob.call, "carol", device: "c1", after: 31) }
    }

    @Test func whenEveryoneDeclinesTheCallIsRejected() throws {
        var call = group(.first, ["bob", "carol"])
        let bob = try apply(.reject, call, "bob", device: "b1")
        #expect(bob.call.state == .ringing)
        #expect(said(bob) == ["bob/b1 call.rejected", "bob/!b1 call.declined_elsewhere", "alice/* call.participant_updated about bob"])
        call = bob.call
        let carol = try apply(.reject, call, "carol", device: "c1")
        #expect(carol.call.state == .rejected)
        #expect(carol.call.endReason == .declined)
        #expect(said(carol) == ["carol/c1 call.rejected", "carol/!c1 call.declined_elsewhere", "alice/* call.rejected"])
    }

    @Test func busyAndUnreachableIdentitiesAreNotRung() throws {
        let someBusy = try #require(GroupCallRules.refuse(busy: ["bob"], in: group(.first), at: now))
        #expect(someBusy.call.state == .ringing)
        #expect(states(someBusy.call) == ["bob": .busy, "carol": .ringing, "dave": .ringing])
        #expect(someBusy.events.isEmpty)
        let allBusy = try #require(GroupCallRules.refuse(busy: ["bob", "carol", "dave"], in: group(.first), at: now))
        #expect(allBusy.call.state == .rejected)
        #expect(allBusy.call.endReason == .busy)
        #expect(said(allBusy) == ["alice/* call.rejected"])
        #expect(GroupCallRules.refuse(busy: [], in: group(.first), at: now) == nil)

        let unreachable = try #require(GroupCallRules.unreachable(["dave"], in: someBusy.call, at: now))
        #expect(states(unreachable.call) == ["bob": .busy, "carol": .ringing, "dave": .unreachable])
        // With only busy and unreachable identities left after carol declines, the call is over.
        let declined = try apply(.reject, unreachable.call, "carol", device: "c1")
        #expect(declined.call.state == .rejected)
    }

    @Test func rolesAreChecked() throws {
        let call = group(.first)
        // Only a device of an identity rung answers; the account's key does not pick one.
        #expect(throws: RingRelayError.self) { try apply(.accept, call, nil) }
        #expect(throws: RingRelayError.self) { try apply(.accept, call, "alice", device: "a1") }
        #expect(throws: RingRelayError.self) { try apply(.cancel, call, "bob", device: "b1") }
        do {
            _ = try apply(.accept, call, "erin", device: "e1")
            Issue.record("an identity outside the call was let in")
        } catch let error as RingRelayError {
            #expect(error.code == "call_not_found")
        }
        let cancelled = try apply(.cancel, call, "alice", device: "a1")
        #expect(cancelled.call.state == .cancelled)
        #expect(said(cancelled) == ["bob/* call.cancelled", "carol/* call.cancelled", "dave/* call.cancelled", "alice/* call.cancelled"])
        #expect(cancelled.unanswered == ["bob", "carol", "dave"])
    }
}
