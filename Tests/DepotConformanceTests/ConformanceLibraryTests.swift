import DepotConformance
import DepotCore
import Testing

/// The conformance library itself: its catalogue, and that its checks catch broken drivers.
@Suite struct ConformanceLibraryTests {
    @Test func catalogueIsLargeUniqueAndNamedByArea() {
        let names = Conformance.checkNames
        #expect(names.count >= 150)
        #expect(Set(names).count == names.count, "check names are unique")
        let areas: Set<String> = [
            "crud", "ids", "values", "filter", "sort", "paging", "count", "stream", "unique", "tx", "concurrency", "schema", "names",
            "errors", "persistence", "differential", "codec", "events", "migrations", "upsert", "modelMacro",
            "aggregate", "projection", "partialUpdate", "byExample", "relation", "deleteRule", "fieldRules", "resultCache",
        ]
        for name in names {
            let parts = name.split(separator: ".", omittingEmptySubsequences: false)
            #expect(parts.count == 2 && areas.contains(String(parts[0])) && !parts[1].isEmpty, "\(name) is area.checkName")
        }
    }

    @Test func unknownCheckNameThrows() async {
        await #expect(throws: ConformanceFailure.self) {
            _ = try await Conformance.run("crud.noSuchCheck", factory: DriverFactory(name: "memory") { _ in MutantDriver(.closeIgnored) })
        }
    }

    /// Checks that must fail for each mutation (derived from what each check asserts).
    static let mustFail: [Mutation: [String]] = [
        .integralDoubleBecomesInt: ["values.integralDoubleStaysDouble", "values.mixedKindsInOneField", "differential.intIdsSeed1"],
        .reverseDefaultOrder: ["sort.defaultIsIdOrder", "ids.intOrderIsNumeric", "ids.stringOrderIsBinary", "paging.limitOnly", "differential.intIdsSeed1"],
        .insertOverwrites: ["crud.insertExistingIdFails", "tx.rollbackOfDriverError", "differential.intIdsSeed1"],
        .intOperandsAsDoubles: ["filter.equalPast2to53IntOperand", "filter.lessPast2to53"],
        .caseInsensitivePrefix: ["filter.prefixCaseSensitive", "filter.prefixLowercaseA", "differential.stringIdsSeed4"],
        .notEqualSkipsMissing: ["filter.notEqualMatchesMissing", "filter.unknownFieldNotEqualMatchesAll", "count.countsNullSemantics", "differential.intIdsSeed2"],
        .noRollback: ["tx.rollbackOnThrowAcrossCollections", "tx.rollbackOfDrop", "differential.transactionsSeed8"],
        .uniqueIgnored: ["unique.insertDuplicateRejected", "unique.intAndDoubleCollide", "errors.uniqueViolationNamesConstraint", "differential.uniqueConstraintSeed6"],
        .countIgnoresFilter: ["count.allAndFiltered", "filter.equalIntMatchesDouble", "differential.intIdsSeed3"],
        .streamReversed: ["stream.largeResultInOrder", "sort.multiKeyAscDesc", "values.boolStaysBool"],
        .assignedIdReused: ["ids.assignedIdsNeverReusedAfterDeletingMax", "ids.assignedAfterExplicitDeletedMax"],
        .offsetIgnored: ["paging.offsetAndLimit", "paging.pagesAreDisjointAndComplete", "stream.largeFilteredSortedPaged"],
        .fieldNamesFolded: ["names.caseDistinctFieldsInOneRecord", "names.awkwardFieldNamesStoredDistinctly", "codec.everyMappedTypeRoundTrips"],
        .closeIgnored: ["errors.closedDriverRefusesWork", "errors.closeTwiceIsHarmless"],
        .stringsTruncatedAtNUL: ["values.stringWithNUL", "codec.everyMappedTypeRoundTrips"],
    ]

    @Test(arguments: Mutation.allCases)
    func mutationIsCaught(_ mutation: Mutation) async throws {
        let factory = DriverFactory(name: "mutant-\(mutation.rawValue)") { _ in MutantDriver(mutation) }
        let names = try #require(Self.mustFail[mutation], "every mutation lists the checks that must catch it")
        for name in names {
            #expect(Conformance.checkNames.contains(name), "\(name) exists")
            var caught = false
            do {
                _ = try await Conformance.run(name, factory: factory)
            } catch {
                caught = true
            }
            #expect(caught, "\(name) must fail on a driver with mutation \(mutation.rawValue)")
        }
    }

    @Test func referenceDriverPassesWhatMutantsFail() async throws {
        let factory = DriverFactory(name: "memory") { _ in MemoryReference() }
        for name in Set(Self.mustFail.values.joined()) {
            let outcome = try await Conformance.run(name, factory: factory)
            #expect(outcome == .passed, "\(name) passes on the reference driver")
        }
    }
}
