/// A value that prints as its type's name and nothing else: no stored property, however it is
/// printed (`"\(value)"`, `debugPrint`, `dump`, a debugger's summary).
///
/// Swift prints a struct without a description of its own property by property, and
/// swift-service-lifecycle logs every service's description when it starts and stops it (at
/// `debug` and `trace`): `serve`'s start-up announcer printed the whole `Bootstrap`, admin token
/// included, three times a start. Services and whatever holds a secret (the admin token, API keys,
/// signing keys, push credentials, the database password) adopt this, so what they hold can
/// never reach a log line by being printed.
///
/// ```swift
/// struct CallPruner: Service, DescribedByNameOnly { … }
/// "\(pruner)"  // "CallPruner"
/// ```
public protocol DescribedByNameOnly: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {}

extension DescribedByNameOnly {
    /// The type's name, as `CallPruner`.
    public var description: String { String(describing: Self.self) }
    /// The type's name, as ``description``.
    public var debugDescription: String { description }
    /// No children: a mirror walk (`dump`, a debugger) sees nothing inside.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
