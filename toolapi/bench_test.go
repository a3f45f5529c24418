package toolapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/versionstore"
)

// benchService is a Service with a policy over a fresh workspace holding f.
func benchService(b *testing.B, content string) (*Service, string) {
	b.Helper()
	ws := b.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
	st, err := versionstore.Open(ws, filepath.Join(b.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	pol, err := policy.New(st.Observations(), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(st, pol, Config{})
	if err != nil {
		b.Fatal(err)
	}
	return svc, ws
}

func benchCall(b *testing.B, svc *Service, tool, args string) Result {
	r, err := svc.Call(context.Background(), tool, Request{Actor: "bench", Arguments: json.RawMessage(args)})
	if err != nil || r.IsError {
		b.Fatalf("%s %s: %v %s", tool, args, err, r.Text)
	}
	return r
}

func benchContent(n int) string {
	line := strings.Repeat("abcdefghij", 6) + "xyz\n"
	s := strings.Repeat(line, n/len(line)+1)[:n/2] + "MARK-A\n" + strings.Repeat(line, n/len(line)+1)
	return s[:n-1] + "\n"
}

var toolSizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}}

// BenchmarkToolRead is the whole read tool: resolve, stream, hash, window,
// record the observation, render.
func BenchmarkToolRead(b *testing.B) {
	for _, sz := range toolSizes {
		b.Run(sz.name, func(b *testing.B) {
			svc, _ := benchService(b, benchContent(sz.n))
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				benchCall(b, svc, ToolRead, `{"file_path":"f.txt"}`)
			}
		})
	}
}

// BenchmarkToolEdit is the whole edit tool after one read: policy intent,
// lock, CAS, publish with fsync, index commit, observation.
func BenchmarkToolEdit(b *testing.B) {
	for _, sz := range toolSizes {
		b.Run(sz.name, func(b *testing.B) {
			svc, _ := benchService(b, benchContent(sz.n))
			benchCall(b, svc, ToolRead, `{"file_path":"f.txt","limit":1}`)
			args := [2]string{
				`{"file_path":"f.txt","old_string":"MARK-A","new_string":"MARK-B"}`,
				`{"file_path":"f.txt","old_string":"MARK-B","new_string":"MARK-A"}`,
			}
			b.SetBytes(int64(sz.n))
			i := 0
			for b.Loop() {
				benchCall(b, svc, ToolEdit, args[i%2])
				i++
			}
		})
	}
}

// BenchmarkToolWrite is the whole write tool replacing a file it wrote.
func BenchmarkToolWrite(b *testing.B) {
	for _, sz := range toolSizes {
		b.Run(sz.name, func(b *testing.B) {
			content := benchContent(sz.n)
			svc, _ := benchService(b, content)
			benchCall(b, svc, ToolRead, `{"file_path":"f.txt","limit":1}`)
			args, _ := json.Marshal(map[string]string{"file_path": "f.txt", "content": content})
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				benchCall(b, svc, ToolWrite, string(args))
			}
		})
	}
}

// BenchmarkToolEditVsBaseline interleaves the 4 KiB edit tool call with a
// bare write+fsync+rename of the same bytes in the same filesystem and
// reports the ratio of mean times. The goal is at most 1.5.
func BenchmarkToolEditVsBaseline(b *testing.B) {
	content := benchContent(4 << 10)
	svc, ws := benchService(b, content)
	benchCall(b, svc, ToolRead, `{"file_path":"f.txt","limit":1}`)
	args := [2]string{
		`{"file_path":"f.txt","old_string":"MARK-A","new_string":"MARK-B"}`,
		`{"file_path":"f.txt","old_string":"MARK-B","new_string":"MARK-A"}`,
	}
	data := []byte(content)
	var tTool, tBase time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		bareAtomicWrite(b, ws, data)
		t1 := time.Now()
		benchCall(b, svc, ToolEdit, args[i%2])
		tTool += time.Since(t1)
		tBase += t1.Sub(t0)
		i++
	}
	b.ReportMetric(float64(tBase.Microseconds())/float64(i), "baseline-µs/op")
	b.ReportMetric(float64(tTool.Microseconds())/float64(i), "edit-µs/op")
	b.ReportMetric(float64(tTool)/float64(tBase), "edit/baseline")
}

func bareAtomicWrite(b *testing.B, dir string, data []byte) {
	tmp := filepath.Join(dir, ".bare.tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	if err := os.Rename(tmp, filepath.Join(dir, "bare.txt")); err != nil {
		b.Fatal(err)
	}
}
