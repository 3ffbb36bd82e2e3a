import Foundation

/// A horizontal grouped bar chart of a ``BenchReport`` as SVG: one group per workload, one
/// bar per target (Depot solid, its raw baseline striped in the same colour), ops/s on a
/// logarithmic axis, each bar labelled with its value and Depot's ratio to raw, and the
/// settings under the title, so the chart reads without the table.
public struct BenchChart: Sendable {
    /// The report drawn.
    public var report: BenchReport

    /// A chart of `report`.
    public init(report: BenchReport) { self.report = report }

    static let colors: [String: String] = ["sqlite": "#1f77b4", "gdbm": "#2ca02c", "json": "#d62728", "memory": "#9467bd"]

    /// The chart as an SVG document.
    public func svg() -> String {
        // One group per workload, then one per workload and client count (--clients).
        var groups: [(workload: Workload, clients: Int?)] = []
        for w in Workload.runOrder {
            if report.results.contains(where: { $0.workload == w && $0.clients == nil }) { groups.append((w, nil)) }
        }
        for w in Workload.runOrder {
            for n in Set(report.results.filter { $0.workload == w }.compactMap(\.clients)).sorted() { groups.append((w, n)) }
        }
        func rows(_ group: (workload: Workload, clients: Int?)) -> [BenchResult] {
            report.results.filter { $0.workload == group.workload && $0.clients == group.clients }
        }
        func label(_ group: (workload: Workload, clients: Int?)) -> String {
            group.clients.map { "\(group.workload.label), \($0) client\($0 == 1 ? "" : "s")" } ?? group.workload.label
        }
        var targets: [(name: String, driver: String, baseline: Bool, side: String?)] = []
        for r in report.results where !targets.contains(where: { $0.name == r.target }) { targets.append((r.target, r.driver, r.baseline, r.side)) }
        let rates = report.results.map(\.opsPerSecond).filter { $0 > 0 }
        let low = pow(10, floor(log10(rates.min() ?? 1)))
        let high = pow(10, ceil(log10(max(rates.max() ?? 10, low * 10))))

        let width = 1100.0, left = 130.0, right = 250.0
        // The legend wraps onto as many lines as it needs; the plot starts below it.
        var legend: [(x: Double, line: Int)] = []
        var lx = left, line = 0
        for t in targets {
            let advance = 30 + Double(t.name.count) * 6.5
            if lx + advance > width - 10, lx > left { lx = left; line += 1 }
            legend.append((lx, line))
            lx += advance
        }
        let modelNote = report.results.contains { $0.side != nil }
        let legendBottom = 78 + 16 * Double(line)
        let top = legendBottom + (modelNote ? 16 : 0) + 42
        let barHeight = 13.0, barGap = 2.0, groupGap = 16.0
        let plotWidth = width - left - right
        func x(_ v: Double) -> Double { left + plotWidth * (log10(max(v, low)) - log10(low)) / (log10(high) - log10(low)) }

        var groupHeights: [Double] = []
        for g in groups {
            let n = Double(rows(g).count)
            groupHeights.append(n * (barHeight + barGap) + groupGap)
        }
        let plotHeight = groupHeights.reduce(0, +)
        let height = top + plotHeight + 70

        var out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n"
        out += "<defs>\n"
        for (driver, color) in BenchChart.colors.sorted(by: { $0.key < $1.key }) {
            out += "<pattern id=\"raw-\(driver)\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"white\"/><rect width=\"3\" height=\"6\" fill=\"\(color)\"/></pattern>\n"
        }
        out += "</defs>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        let s = report.settings
        out += text(left, 24, "Depot vs raw engines: operations per second (log scale, longer is faster)", weight: "bold", size: 16)
        out += text(left, 42, "\(s.buildMode) build · durability \(s.durability) (durable commits: full) · \(s.records) records × \(s.fieldsPerRecord) fields × \(s.bytesPerField) B · \(s.operations) ops/workload · \(s.rounds) round(s), medians · \(s.processors) CPUs, load \(s.loadAverageAtStart)")
        out += text(left, 57, "Solid bar: Depot through Store/Collection over the driver. Striped: the engine's raw C API (JSON: JSONText + atomic write floor). “n× raw”: Depot's time ÷ raw time.")
        if modelNote {
            out += text(left, legendBottom + 16, "Model workloads: @Model solid, Codable lighter, Record lightest. “n× Record”: the side's time ÷ the untyped Record side's time.")
        }
        // Legend.
        for (t, place) in zip(targets, legend) {
            let fill = t.baseline ? "url(#raw-\(t.driver))" : (BenchChart.colors[t.driver] ?? "#777")
            let ly = 68 + 16 * Double(place.line)
            out += "<rect x=\"\(f(place.x))\" y=\"\(f(ly))\" width=\"14\" height=\"11\" fill=\"\(fill)\"\(BenchChart.opacity(t.side)) stroke=\"\(BenchChart.colors[t.driver] ?? "#777")\"/>\n"
            out += text(place.x + 18, ly + 10, t.name)
        }
        // Axis and decade grid lines.
        var decade = low
        while decade <= high * 1.0001 {
            let gx = x(decade)
            out += "<line x1=\"\(f(gx))\" y1=\"\(f(top - 8))\" x2=\"\(f(gx))\" y2=\"\(f(top + plotHeight))\" stroke=\"#ddd\"/>\n"
            out += text(gx, top - 12, BenchChart.short(decade) + "/s", anchor: "middle", fill: "#555")
            out += text(gx, top + plotHeight + 14, BenchChart.short(decade) + "/s", anchor: "middle", fill: "#555")
            decade *= 10
        }
        var y = top
        for (i, g) in groups.enumerated() {
            let groupRows = rows(g)
            out += text(left - 8, y + Double(groupRows.count) * (barHeight + barGap) / 2 + 4, label(g), anchor: "end", weight: "bold", size: 12)
            for r in groupRows {
                let color = BenchChart.colors[r.driver] ?? "#777"
                let fill = r.baseline ? "url(#raw-\(r.driver))" : color
                let w0 = x(r.opsPerSecond) - left
                out += "<rect x=\"\(f(left))\" y=\"\(f(y))\" width=\"\(f(max(w0, 1)))\" height=\"\(f(barHeight))\" fill=\"\(fill)\"\(BenchChart.opacity(r.side)) stroke=\"\(color)\" stroke-width=\"0.8\"><title>\(escape(r.target)) \(escape(label(g))): \(BenchReport.rate(r.opsPerSecond)) ops/s</title></rect>\n"
                var label = "\(r.target): \(BenchReport.rate(r.opsPerSecond))/s"
                var ratios: [String] = []
                if let ratio = r.ratioToRaw { ratios.append(String(format: "%.2f× raw", ratio)) }
                if let ratio = r.ratioToRecord { ratios.append(String(format: "%.2f× Record", ratio)) }
                if let scaling = r.scalingToOneClient, r.clients != 1 { ratios.append(String(format: "%.2f× 1 client", scaling)) }
                if !ratios.isEmpty { label += "  (" + ratios.joined(separator: ", ") + ")" }
                out += text(left + max(w0, 1) + 5, y + barHeight - 3, label, size: 10)
                y += barHeight + barGap
            }
            y += groupGap
            if i < groups.count - 1 {
                out += "<line x1=\"\(f(left - 120))\" y1=\"\(f(y - groupGap / 2))\" x2=\"\(f(width - 10))\" y2=\"\(f(y - groupGap / 2))\" stroke=\"#eee\"/>\n"
            }
        }
        out += text(left - 120, height - 30, "YCSB A 50/50 read/update · B 95/5 · C read only · D 95% read latest + 5% insert · E 95% scan (1–100) + 5% insert", fill: "#555")
        out += text(left - 120, height - 15, "F 50% read + 50% read-modify-write · zipfian \(s.zipfianConstant), scrambled · each operation one transaction · bulk: batches of 10,000 · durable commit: durability full", fill: "#555")
        out += "</svg>\n"
        return out
    }

    /// The fill opacity of a typed-model side's bars: `@Model` solid, Codable and Record
    /// lighter, so the three sides of one engine tell apart in its colour.
    static func opacity(_ side: String?) -> String {
        switch side {
        case ModelSide.codable.rawValue: " fill-opacity=\"0.6\""
        case ModelSide.record.rawValue: " fill-opacity=\"0.35\""
        default: ""
        }
    }

    static func short(_ v: Double) -> String {
        if v >= 1_000_000 { return "\(Int(v / 1_000_000))M" }
        if v >= 1_000 { return "\(Int(v / 1_000))k" }
        if v >= 1 { return "\(Int(v))" }
        return String(format: "%g", v)
    }

    private func f(_ v: Double) -> String { String(format: "%.1f", v) }

    private func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    private func text(_ x: Double, _ y: Double, _ s: String, anchor: String = "start", weight: String = "normal", size: Int = 11, fill: String = "#222") -> String {
        "<text x=\"\(f(x))\" y=\"\(f(y))\" text-anchor=\"\(anchor)\" font-weight=\"\(weight)\" font-size=\"\(size)\" fill=\"\(fill)\">\(escape(s))</text>\n"
    }
}
