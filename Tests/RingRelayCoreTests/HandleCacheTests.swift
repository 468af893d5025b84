import Synchronization
import Testing

@testable import RingRelayCore

/// Metric handles are made once per key, however many tasks ask for them at once.
@Suite struct HandleCacheTests {
    final class Handle: Sendable {
        let key: String
        init(key: String) { self.key = key }
    }

    final class Made: Sendable {
        let counts = Mutex<[String: Int]>([:])
    }

    @Test func eachKeyGetsOneValueMadeOnce() async {
        let cache = HandleCache<String, Handle>()
        let made = Made()
        let handles = await withTaskGroup(of: (String, ObjectIdentifier).self) { group in
            for index in 0..<400 {
                let key = "k\(index % 4)"
                group.addTask {
                    let handle = cache.value(for: key) {
                        made.counts.withLock { $0[key, default: 0] += 1 }
                        return Handle(key: key)
                    }
                    return (handle.key, ObjectIdentifier(handle))
                }
            }
            return await group.reduce(into: [String: Set<ObjectIdentifier>]()) { $0[$1.0, default: []].insert($1.1) }
        }
        // Two tasks may both make a handle for a new key; only the first kept is ever handed out.
        #expect(handles.count == 4)
        #expect(handles.values.allSatisfy { $0.count == 1 }, "\(handles)")
        #expect(made.counts.withLock { $0.count == 4 })
        let again = cache.value(for: "k0") { Handle(key: "new") }
        #expect(handles["k0"] == [ObjectIdentifier(again)])
    }
}
