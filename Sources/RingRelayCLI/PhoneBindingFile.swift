import Foundation
import RingRelayKit

/// The phone's key binding, remembered in a file beside the key (`<key file>.bindings.json`), so
/// that a run with a new key deletes the binding of the old one: a device whose old binding
/// stayed would be sealed to with a key it no longer has.
actor PhoneBindingFile: BindingStore {
    /// The file.
    nonisolated let url: URL

    init(url: URL) {
        self.url = url
    }

    /// The bindings remembered; none when the file is missing or unreadable (the worst that
    /// follows is an old binding left on the server, which the next key change cannot delete).
    func load() -> [RegisteredBinding] {
        guard let data = try? Data(contentsOf: url) else { return [] }
        return (try? JSONDecoder().decode([RegisteredBinding].self, from: data)) ?? []
    }

    /// Replaces the file atomically; a failure to write only loses what ``load()`` would say.
    func save(_ bindings: [RegisteredBinding]) {
        guard let data = try? JSONEncoder().encode(bindings) else { return }
        try? data.write(to: url, options: .atomic)
    }
}
