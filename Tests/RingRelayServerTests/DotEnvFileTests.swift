import Foundation
import RingRelayServer
import RingRelayTesting
import Testing

/// `.env` as the common dotenv tools read it, and refused, by line, where they would disagree.
@Suite struct DotEnvFileTests {
    private func values(_ text: String) throws -> [String: String] {
        try DotEnvFile(parsing: text).values
    }

    private func problem(_ text: String) -> DotEnvError? {
        do {
            _ = try DotEnvFile(parsing: text)
            return nil
        } catch {
            return error
        }
    }

    @Test func readsWhatDotenvToolsAgreeOn() throws {
        let text = """
            # a comment
            \u{20}
            PLAIN=value
            export EXPORTED=yes
            SPACED = around the equals sign\u{20}\u{20}
            COMMENTED=8080 # the port
            HASH=abc#def
            DOUBLE="quoted # not a comment"   # a comment
            SINGLE='literal $HOME and \\n'
            ESCAPES="a\\tb\\nc \\"q\\" \\\\ \\$HOME"
            EMPTY=
            EMPTY_WITH_COMMENT= # nothing
            QUOTED_EMPTY=""
            TWICE=first
            TWICE=second
            PRICE=5$
            """
        #expect(
            try values(text) == [
                "PLAIN": "value", "EXPORTED": "yes", "SPACED": "around the equals sign", "COMMENTED": "8080", "HASH": "abc#def",
                "DOUBLE": "quoted # not a comment", "SINGLE": "literal $HOME and \\n", "ESCAPES": "a\tb\nc \"q\" \\ $HOME", "EMPTY": "",
                "EMPTY_WITH_COMMENT": "", "QUOTED_EMPTY": "", "TWICE": "second", "PRICE": "5$",
            ])
    }

    @Test func windowsLineEndsAndAByteOrderMarkAreRead() throws {
        #expect(try values("\u{FEFF}A=1\r\nB='2'\r\n") == ["A": "1", "B": "2"])
    }

    @Test func refusesWhatItCannotReadWithTheLineNumber() {
        let cases: [(String, Int, String)] = [
            ("A=1\nnot a setting\n", 2, "expected NAME=value"),
            ("A=1\n\n1A=2", 3, "the name must be"),
            ("MY-NAME=2", 1, "the name must be"),
            ("A=\"open", 1, "double quote is not closed"),
            ("A='open", 1, "single quote is not closed"),
            ("A=\"one\" two", 1, "after the closing quote"),
            ("A=\"bad \\q escape\"", 1, "unknown escape"),
            ("A=${HOME}/data", 1, "'$' before a name"),
            ("A=\"$HOME\"", 1, "'$' before a name"),
            ("=value", 1, "the name must be"),
        ]
        for (text, line, problem) in cases {
            let error = self.problem(text)
            #expect(error?.line == line, "\(text)")
            #expect(error?.problem.contains(problem) == true, "\(text): \(error?.description ?? "no error")")
        }
    }

    @Test func errorsNameTheLineButNeverTheValue() {
        let error = problem("RINGRELAY_ADMIN_TOKEN=\"s3cret-admin-token")
        #expect(error?.description == ".env line 1: the double quote is not closed on this line.")
    }

    @Test func aMissingFileIsNoFileAndAnUnreadableOneIsAnError() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        #expect(try DotEnvFile.read(atPath: directory.appending(".env")) == nil)
        try Data([0x41, 0x3D, 0xFF, 0x0A]).write(to: URL(fileURLWithPath: directory.appending("latin1.env")))
        #expect(throws: DotEnvError.self) { try DotEnvFile.read(atPath: directory.appending("latin1.env")) }
        try "A='1' # one\n".write(toFile: directory.appending("good.env"), atomically: true, encoding: .utf8)
        #expect(try DotEnvFile.read(atPath: directory.appending("good.env"))?.values == ["A": "1"])
    }
}
