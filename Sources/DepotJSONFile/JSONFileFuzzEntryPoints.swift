import DepotCore

/// Not public API: the JSON-file driver's reader of store files, reachable by the fuzz
/// harness (`DepotFuzz`, Docs/Fuzzing.md) without making its types public.
package enum _JSONFileFuzzEntryPoints {
    /// Reads a whole store file as opening the store does, and writes the state it holds
    /// back as the driver would (compact or `pretty`).
    /// - Throws: ``DepotError`` `.corrupted`, `.decoding` or `.schemaMismatch`, as opening.
    package static func decodeAndEncode(_ bytes: [UInt8], pretty: Bool) throws -> [UInt8] {
        JSONDocument.encode(try JSONDocument.decode(bytes), pretty: pretty)
    }
}
