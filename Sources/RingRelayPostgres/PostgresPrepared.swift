import PostgresNIO

/// A statement every call runs, written once as an interpolated query (``query``), whose text
/// is the same whatever the values: only its bindings change.
protocol PreparedText {
    /// The text, from a query made with any values (the placeholders are numbered the same).
    static var sql: String { get }
    /// The types of the bindings, when a value may be `NULL` (a `NULL` binding has no type, and
    /// a statement is prepared with the types of its first run's bindings); empty to take them
    /// from the bindings.
    static var bindingDataTypes: [PostgresDataType] { get }
}

extension PreparedText {
    static var bindingDataTypes: [PostgresDataType] { [] }
}

/// A statement PostgreSQL parses and plans once on each connection, and then only binds and
/// runs.
///
/// postgres-nio sends a plain query as an unnamed statement, which PostgreSQL parses, analyses
/// and plans again at every run: at 300 calls a second across three instances, that was a third
/// of PostgreSQL's CPU (`perf`: `GetCachedPlan` 27 %, `parse_analyze_varparams` 8 %). The hot
/// statements run as these instead; postgres-nio prepares each on a connection the first time
/// it runs there.
struct Prepared<Text: PreparedText>: PostgresPreparedStatement {
    typealias Row = PostgresRandomAccessRow

    static var name: String { "ringrelay_" + String(describing: Text.self) }
    static var sql: String { Text.sql }
    static var bindingDataTypes: [PostgresDataType] { Text.bindingDataTypes }

    /// The query's bindings (its text must be ``PreparedText/sql``).
    let bindings: PostgresBindings

    init(_ query: PostgresQuery) {
        assert(query.sql == Text.sql, "a prepared statement's query changed its text")
        bindings = query.binds
    }

    func makeBindings() throws -> PostgresBindings { bindings }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRandomAccessRow { row.makeRandomAccess() }
}

extension PostgresStore {
    /// Runs a prepared statement and returns its rows.
    func rows<Text>(_ statement: Prepared<Text>) async throws -> [PostgresRandomAccessRow] {
        try await withConnection { connection in
            var rows: [PostgresRandomAccessRow] = []
            for try await row in try await connection.execute(statement, logger: self.logger) { rows.append(row) }
            return rows
        }
    }
}
