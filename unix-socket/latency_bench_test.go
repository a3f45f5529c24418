package unixsocket

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/toolapi"
)

// BenchmarkSocketLatency measures p50 and p99 of 10,000 calls — a read of a
// 4 KiB file, and a 4 KiB edit — through the socket with the typed client
// and in-process, alternating, in the same run, and reports the socket's
// overhead.
// Run: go test ./unix-socket -run '^$' -bench SocketLatency -benchtime 1x
func BenchmarkSocketLatency(b *testing.B) {
	for b.Loop() {
		d := startDaemon(b, 0)
		content := strings.Repeat(strings.Repeat("x", 63)+"\n", 64)
		content = strings.Replace(content, "x", "A", 1)
		if err := os.WriteFile(filepath.Join(d.ws, "f.txt"), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		read := json.RawMessage(`{"file_path":"f.txt"}`)
		edits := [2]json.RawMessage{
			json.RawMessage(`{"file_path":"f.txt","old_string":"Axx","new_string":"Bxx"}`),
			json.RawMessage(`{"file_path":"f.txt","old_string":"Bxx","new_string":"Axx"}`),
		}
		const n = 10000
		ctx := context.Background()
		// Socket and in-process calls alternate, so drift in the disk's
		// latency (an edit fsyncs) falls on both alike.
		measure := func(tool string, args func(int) json.RawMessage) (sock, local []time.Duration) {
			sock, local = make([]time.Duration, n), make([]time.Duration, n)
			for i := range n {
				t0 := time.Now()
				r, err := d.client.Call(ctx, tool, ToolRequest{Actor: "bench", Arguments: args(2 * i)})
				sock[i] = time.Since(t0)
				if err != nil || r.IsError {
					b.Fatalf("%s: %v %s", tool, err, r.Text)
				}
				t0 = time.Now()
				lr, err := d.svc.Call(ctx, tool, toolapi.Request{Actor: "bench", Arguments: args(2*i + 1)})
				local[i] = time.Since(t0)
				if err != nil || lr.IsError {
					b.Fatalf("%s: %v %s", tool, err, lr.Text)
				}
			}
			return sock, local
		}
		readArgs := func(int) json.RawMessage { return read }
		editArgs := func(i int) json.RawMessage { return edits[i%2] }
		measure("read", readArgs) // observe, and warm the caches
		report := func(name string, sock, local []time.Duration) {
			p := func(l []time.Duration, q float64) float64 {
				s := slices.Clone(l)
				slices.Sort(s)
				return float64(s[int(q*float64(len(s)-1))].Microseconds())
			}
			b.ReportMetric(p(sock, 0.5), name+"-socket-p50-µs")
			b.ReportMetric(p(sock, 0.99), name+"-socket-p99-µs")
			b.ReportMetric(p(local, 0.5), name+"-inproc-p50-µs")
			b.ReportMetric(p(local, 0.99), name+"-inproc-p99-µs")
			b.ReportMetric(p(sock, 0.5)-p(local, 0.5), name+"-overhead-p50-µs")
		}
		sock, local := measure("read", readArgs)
		report("read", sock, local)
		sock, local = measure("edit", editArgs)
		report("edit", sock, local)
	}
}
