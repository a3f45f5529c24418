package integration

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// report is BenchmarkMount's printout: times, ratios, daemon CPU,
// requests, and the mount's performance goals (extraction near the C
// loopback, warm reads, writes and walks near native), each judged on a
// ratio or a count from this run.
func report(fx *fixtures, res results, counts requests) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nBenchmarkMount: medians of %d rounds, systems in rotated order each round.\n", len(res[sysNative][wExtract]))
	fmt.Fprintf(&sb, "go build: GOCACHE %s, warm with the standard library and the module dependencies;\n"+
		"dshfs's own packages are compiled in the mount each time (new directory, new cache key).\n", fx.goCache)
	section(&sb, "Wall time (s)", func(w io.Writer) { timesTable(w, res) })
	section(&sb, "Ratios (median of the rounds' ratios)", func(w io.Writer) { ratiosTable(w, res) })
	section(&sb, "Daemon CPU (utime+stime, s; settled after each workload)", func(w io.Writer) { cpuTable(w, res) })
	section(&sb, "FUSE requests (separate untimed pass with request logging)", func(w io.Writer) { requestsTable(w, counts) })
	section(&sb, "Requests per extracted file, by opcode", func(w io.Writer) { opcodeTable(w, counts) })
	section(&sb, "Goals: near the C loopback and native (limits on this run's ratios and counts)", func(w io.Writer) { goalsTable(w, res, counts) })
	return sb.String()
}

func section(sb *strings.Builder, title string, table func(io.Writer)) {
	fmt.Fprintf(sb, "\n%s\n", title)
	tw := tabwriter.NewWriter(sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	table(tw)
	tw.Flush()
}

var benchSystemNames = []string{sysNative, sysDshfs, sysDshfsNoP, sysC, sysGoFuse, sysCURing}

func header(w io.Writer, first string, cols []string) {
	fmt.Fprintf(w, "%s\t%s\t\n", first, strings.Join(cols, "\t"))
}

// workloadTable prints a row a workload and a column a col, each cell
// what cell says of them.
func workloadTable(w io.Writer, cols []string, cell func(col, workload string) string) {
	header(w, "workload", cols)
	for _, wl := range workloads {
		row(w, wl.name, cols, func(col string) string { return cell(col, wl.name) })
	}
}

// row prints one line: label, then cell of each col.
func row(w io.Writer, label string, cols []string, cell func(col string) string) {
	fmt.Fprintf(w, "%s\t", label)
	for _, col := range cols {
		fmt.Fprintf(w, "%s\t", cell(col))
	}
	fmt.Fprintln(w)
}

func timesTable(w io.Writer, res results) {
	workloadTable(w, benchSystemNames, func(sys, wl string) string {
		return fmt.Sprintf("%.3f", median(res.seconds(sys, wl, wallOf)))
	})
}

// The ratios printed: each system against native, the dshfs mounts
// against both loopbacks.
var ratioPairs = [][2]string{{sysDshfs, sysNative}, {sysDshfsNoP, sysNative}, {sysC, sysNative}, {sysGoFuse, sysNative},
	{sysCURing, sysNative}, {sysDshfs, sysC}, {sysDshfsNoP, sysC}, {sysDshfs, sysGoFuse}, {sysDshfsNoP, sysGoFuse},
	{sysDshfs, sysCURing}, {sysDshfsNoP, sysCURing}}

func ratiosTable(w io.Writer, res results) {
	cols := make([]string, len(ratioPairs))
	pairs := map[string][2]string{}
	for i, p := range ratioPairs {
		cols[i] = p[0] + "÷" + shortName(p[1])
		pairs[cols[i]] = p
	}
	workloadTable(w, cols, func(col, wl string) string {
		p := pairs[col]
		return fmt.Sprintf("%.2f×", res.ratio(p[0], p[1], wl))
	})
}

func shortName(sys string) string { return strings.TrimSuffix(sys, "-loopback") }

func cpuTable(w io.Writer, res results) {
	daemons := benchSystemNames[1:]
	workloadTable(w, daemons, func(sys, wl string) string {
		return fmt.Sprintf("%.2f", median(res.seconds(sys, wl, cpuOf)))
	})
	row(w, "µs per extracted file", daemons, func(sys string) string { return fmt.Sprintf("%.0f", res.cpuPerFile(sys)) })
}

func requestsTable(w io.Writer, counts requests) {
	daemons := benchSystemNames[1:]
	workloadTable(w, daemons, func(sys, wl string) string { return fmt.Sprint(sum(counts[sys][wl])) })
	row(w, "per extracted file", daemons, func(sys string) string { return fmt.Sprintf("%.2f", counts.perFile(sys)) })
}

// opcodeTable breaks each daemon's extraction down by opcode, per file.
func opcodeTable(w io.Writer, counts requests) {
	daemons := benchSystemNames[1:]
	ops := map[string]bool{}
	for _, sys := range daemons {
		for op := range counts[sys][wExtract] {
			ops[op] = true
		}
	}
	header(w, "opcode", daemons)
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		fmt.Fprintf(w, "%s\t", op)
		for _, sys := range daemons {
			fmt.Fprintf(w, "%.2f\t", float64(counts[sys][wExtract][op])/extractFiles)
		}
		fmt.Fprintln(w)
	}
}

// A performance goal of the mount: got must not exceed limit.
type goal struct {
	what       string
	got, limit float64
	unit       string
}

func goalsTable(w io.Writer, res results, counts requests) {
	fmt.Fprintf(w, "system\tgoal\tgot\tlimit\t\t\n")
	for _, sys := range []string{sysDshfs, sysDshfsNoP} {
		for _, g := range goals(res, counts, sys) {
			verdict := "pass"
			if !(g.got <= g.limit) {
				verdict = "MISS"
			}
			fmt.Fprintf(w, "%s\t%s\t%.2f%s\t≤ %.4g%s\t%s\t\n", sys, g.what, g.got, g.unit, g.limit, g.unit, verdict)
		}
	}
}

func goals(res results, counts requests, sys string) []goal {
	return []goal{
		{"extraction ÷ C loopback", res.ratio(sys, sysC, wExtract), 1.0, "×"},
		{"extraction ÷ native", res.ratio(sys, sysNative, wExtract), 8, "×"},
		{"requests per extracted file", counts.perFile(sys), 7, ""},
		{"daemon CPU per extracted file", res.cpuPerFile(sys), 250, " µs"},
		{"512 MiB write ÷ native", res.ratio(sys, sysNative, wWrite), 1.2, "×"},
		{"warm read ÷ native", res.ratio(sys, sysNative, wRead), 1.1, "×"},
		{"warm git status ÷ native", res.ratio(sys, sysNative, wStatus), 2, "×"},
		{"warm find ÷ native", res.ratio(sys, sysNative, wFind), 2, "×"},
		{"warm du ÷ native", res.ratio(sys, sysNative, wDu), 2, "×"},
	}
}

// reportMetrics hands the dshfs ratios to the benchmark framework too.
func reportMetrics(b *testing.B, res results) {
	for _, wl := range workloads {
		slug := strings.ReplaceAll(wl.name, " ", "-")
		b.ReportMetric(res.ratio(sysDshfs, sysNative, wl.name), slug+"-x")
	}
	b.ReportMetric(res.ratio(sysDshfs, sysC, wExtract), "extract-vs-C-x")
	b.ReportMetric(res.cpuPerFile(sysDshfs), "cpu-µs/file")
}

func wallOf(s sample) time.Duration { return s.wall }
func cpuOf(s sample) time.Duration  { return s.cpu }

// seconds are one field of a system's samples for a workload, one a round.
func (res results) seconds(sys, wl string, field func(sample) time.Duration) []float64 {
	var xs []float64
	for _, s := range res[sys][wl] {
		xs = append(xs, field(s).Seconds())
	}
	return xs
}

// ratio is the median over rounds of a's time ÷ b's time in that round.
func (res results) ratio(a, b, wl string) float64 {
	as, bs := res.seconds(a, wl, wallOf), res.seconds(b, wl, wallOf)
	var rs []float64
	for i := range min(len(as), len(bs)) {
		rs = append(rs, as[i]/bs[i])
	}
	return median(rs)
}

func (res results) cpuPerFile(sys string) float64 {
	return median(res.seconds(sys, wExtract, cpuOf)) * 1e6 / extractFiles
}

func (counts requests) perFile(sys string) float64 {
	return float64(sum(counts[sys][wExtract])) / extractFiles
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
