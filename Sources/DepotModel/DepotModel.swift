@_exported import DepotCore

/// Makes a struct or a final class a ``DepotCore/StoredModel``: writes its id, schema and
/// field mapping as plain code that talks to ``DepotCore/FieldSink`` and
/// ``DepotCore/FieldSource`` directly, so nothing of `Codable` runs for its scalar fields
/// (Docs/Models.md).
///
/// ```swift
/// @Model(collection: "books", unique: [["author", "title"]], indexes: [["year"]])
/// struct Book {
///     @ID var isbn: String
///     var author: String
///     var title: String
///     var year: Int
///     @Stored("page_count") var pages: Int
///     @Default(0) var rating: Int
///     var subtitle: String?
///     @Transient var isSelected = false
/// }
/// ```
///
/// The id is the property marked ``ID()``, or the one named `id`: `String`, `Int`, `Int64`,
/// `UUID`, or an optional `Int`/`Int64` that is `nil` to have the store assign it (a `var`).
/// Every other stored property is a field named after it; an optional is absent when `nil`
/// and `nil` when the record lacks it. What the macro cannot handle is a compile-time error.
///
/// - Parameters:
///   - collection: the collection's name; the type's name when `nil`.
///   - unique: unique constraints over several properties, by property name.
///   - indexes: secondary indexes over several properties, by property name.
@attached(extension, conformances: StoredModel, names: named(ID), named(collectionName), named(uniqueConstraints), named(indexes), named(storedRecordID), named(encodeRecord), named(init), named(assigningID))
@attached(member, names: named(init))
public macro Model(collection: String? = nil, unique: [[String]] = [], indexes: [[String]] = []) =
    #externalMacro(module: "DepotModelMacros", type: "ModelMacro")

/// Marks the property that is the model's id, when it is not named `id`.
@attached(peer)
public macro ID() = #externalMacro(module: "DepotModelMacros", type: "PropertyMarkerMacro")

/// Makes the property's field unique in its collection (a one-field ``DepotCore/UniqueConstraint``
/// named `<field>_unique`). For a constraint over several fields use `@Model(unique:)`.
@attached(peer)
public macro Unique() = #externalMacro(module: "DepotModelMacros", type: "PropertyMarkerMacro")

/// Asks drivers to keep a secondary index on the property's field (an
/// ``DepotCore/IndexDefinition`` named `<field>_idx`). For an index over several fields use
/// `@Model(indexes:)`.
@attached(peer)
public macro Indexed() = #externalMacro(module: "DepotModelMacros", type: "PropertyMarkerMacro")

/// Keeps the property out of storage: it is not written, and a model read from a record
/// has the property's initial value (which it must have).
@attached(peer)
public macro Transient() = #externalMacro(module: "DepotModelMacros", type: "PropertyMarkerMacro")

/// Stores the property under `name` instead of its own name. `name` must be a valid field
/// name (``DepotCore/FieldName``), checked at compile time.
@attached(peer)
public macro Stored(_ name: String) = #externalMacro(module: "DepotModelMacros", type: "PropertyMarkerMacro")

/// Converts the property's value with `transformer` on its way to storage and back, in
/// place of the type's own mapping: `@Transform(.millisecondsSince1970) var created: Date`.
/// The expression is evaluated each time a value is converted.
@attached(peer)
public macro Transform<T: FieldTransformer>(_ transformer: T) = #externalMacro(module: "DepotModelMacros", type: "PropertyMarkerMacro")

/// The value the property takes when a stored record lacks its field, so a model can gain a
/// property without a migration: `@Default(0) var rating: Int`. The expression must have a
/// type of its own (`@Default([String]())`, not `@Default([])`); it is evaluated each time
/// it is used.
@attached(peer)
public macro Default<T>(_ value: T) = #externalMacro(module: "DepotModelMacros", type: "PropertyMarkerMacro")
