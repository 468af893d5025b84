import Crypto
import Foundation
import RingRelayKit
import RingRelayTesting
import Testing

@testable import RingRelayCLI

/// `ringrelay phone --key-file`: the key is made once, only its owner can read it, and it is
/// reused after; a file others may read, or one that is no key, is refused without showing it.
@Suite struct PhoneKeyFileTests {
    @Test func aMissingKeyFileIsCreatedForItsOwnerOnlyAndReusedAfter() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("phone.key")

        let made = try PhoneKeyFile.loadOrCreate(at: path)
        #expect(made.created)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        #expect(try P256.KeyAgreement.PrivateKey(pemRepresentation: pem).rawRepresentation == made.privateKey.rawRepresentation)

        let reused = try PhoneKeyFile.loadOrCreate(at: path)
        #expect(!reused.created)
        #expect(reused.privateKey.rawRepresentation == made.privateKey.rawRepresentation)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == pem)
        // One key, one binding token: every run updates the same binding.
        #expect(reused.bindingToken == made.bindingToken)
        #expect(made.bindingToken.count == 64 && made.bindingToken.allSatisfy(\.isHexDigit))
        #expect(try PhoneKeyFile.loadOrCreate(at: directory.appending("other.key")).bindingToken != made.bindingToken)
        // The SDK's files sit beside the key.
        #expect(made.replayStore.fileURL.path == path + ".opened-invites.json")
        #expect(made.knownKeys.fileURL.path == path + ".known-device-keys.json")
        #expect(made.bindingStore.url.path == path + ".bindings.json")
    }

    @Test func aKeyFileOthersMayReadIsRefusedWithoutShowingTheKey() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("phone.key")
        _ = try PhoneKeyFile.loadOrCreate(at: path)
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)

        let failure = try #require(throws: PhoneKeyFile.Failure.self) { try PhoneKeyFile.loadOrCreate(at: path) }
        #expect(failure.description.contains("chmod 600"), "\(failure)")
        #expect(failure.description.contains("644"), "\(failure)")
        // Not replaced either: the key callers trust is still there.
        #expect(try String(contentsOfFile: path, encoding: .utf8) == pem)
        for line in pem.split(separator: "\n") where !line.hasPrefix("-----") {
            #expect(!failure.description.contains(line))
        }
    }

    @Test func aFileThatIsNoKeyIsRefused() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("phone.key")
        #expect(FileManager.default.createFile(atPath: path, contents: Data("not a key\n".utf8), attributes: [.posixPermissions: 0o600]))
        let failure = try #require(throws: PhoneKeyFile.Failure.self) { try PhoneKeyFile.loadOrCreate(at: path) }
        #expect(failure.description.contains("not a P-256 private key"), "\(failure)")
        let missingDirectory = try #require(throws: PhoneKeyFile.Failure.self) {
            try PhoneKeyFile.loadOrCreate(at: directory.appending("no-such-dir/phone.key"))
        }
        #expect(missingDirectory.description.contains("cannot be created"), "\(missingDirectory)")
    }
}
