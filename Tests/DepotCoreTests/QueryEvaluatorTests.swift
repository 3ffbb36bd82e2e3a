import DepotCore
import Testing

@Suite struct QueryEvaluatorTests {
    @Test func intAndDoubleCompareExactlyPast2to53() {
        #expect(QueryEvaluator.compareIntDouble(9_007_199_254_740_993, 9_007_199_254_740_992.0) == 1)
        #expect(QueryEvaluator.equals(.int(1), .double(1.0)))
        #expect(!QueryEvaluator.equals(.bool(true), .int(1)))
    }
}
