package toolapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/rogpeppe/go-internal/txtar"
)

// TestTranscripts pins everything the model can see, byte for byte: each
// testdata/transcripts/*.txtar holds a script of workspace set-up steps and
// tool calls, and after it one section per call with the Result exactly as
// the model gets it. go test -update rewrites the result sections from the
// current code; the script is never rewritten.
//
// Script lines (blank lines and #comments are skipped):
//
//	bare                          serve without a policy (first line only)
//	config {"ReadLimit":3}        the Config, as JSON (first line only)
//	put REL "go-quoted bytes"     write a file behind the store's back
//	png|jpeg|gif|webp REL W H     write a generated image
//	mkdir REL | rm REL | symlink TARGET REL
//	cat REL                       record a file's bytes, Go-quoted
//	call ACTOR TOOL ARGS          a tool call; ACTOR "-" is the empty actor
//	callin ACTOR CWD TOOL ARGS    a tool call with a request cwd
//	cancelled ACTOR TOOL ARGS     a tool call under a cancelled context
//	writing REL PID COMM          a process holds REL open for writing through the mount
//	closed REL                    and lets it go
//
// $MNT in a script is the mount point; in a result, the mount point, the
// backing directory and the test's temporary root read $MNT, $WORK, $TMP.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "transcripts", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts (%v)", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if len(ar.Files) == 0 || ar.Files[0].Name != "script" {
				t.Fatalf("%s: the first section must be -- script --", file)
			}
			got := runTranscript(t, ar.Files[0].Data)
			want := &txtar.Archive{Comment: ar.Comment, Files: append([]txtar.File{ar.Files[0]}, got...)}
			compareTranscript(t, file, ar, want)
		})
	}
}

// compareTranscript checks that the archive's result sections are want's,
// or rewrites the file with -update.
func compareTranscript(t *testing.T, file string, have, want *txtar.Archive) {
	t.Helper()
	formatted := txtar.Format(want)
	if *update {
		if err := os.WriteFile(file, formatted, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if len(have.Files) != len(want.Files) {
		t.Errorf("%s: %d result sections, the script makes %d (go test -update rewrites them)", file, len(have.Files)-1, len(want.Files)-1)
	}
	for i := 1; i < min(len(have.Files), len(want.Files)); i++ {
		h, w := have.Files[i], want.Files[i]
		if h.Name != w.Name || !bytes.Equal(h.Data, w.Data) {
			t.Errorf("%s: section %q differs (go test -update rewrites it):\n got -- %s --\n%s\nwant -- %s --\n%s", file, h.Name, w.Name, w.Data, h.Name, h.Data)
		}
	}
}

// transcript runs one script against a fresh harness.
type transcript struct {
	t   *testing.T
	h   *harness
	n   int // steps recorded so far
	out []txtar.File
	// writers are the files being written through the mount (nil: none).
	writers *scriptWriters
}

func runTranscript(t *testing.T, script []byte) []txtar.File {
	lines := strings.Split(string(script), "\n")
	var opts []harnessOption
	for len(lines) > 0 {
		f := strings.Fields(lines[0])
		if len(f) == 0 || f[0] != "bare" && f[0] != "config" {
			break
		}
		opts = append(opts, transcriptOption(t, lines[0]))
		lines = lines[1:]
	}
	tr := &transcript{t: t, h: newHarness(t, opts...)}
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tr.step(strings.ReplaceAll(line, "$MNT", tr.h.mount))
	}
	return tr.out
}

func transcriptOption(t *testing.T, line string) harnessOption {
	if line == "bare" {
		return bareProvider()
	}
	var c Config
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "config ")), &c); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return withConfig(c)
}

// step runs one script line.
func (tr *transcript) step(line string) {
	verb, rest, _ := strings.Cut(line, " ")
	f := strings.Fields(rest)
	h := tr.h
	switch verb {
	case "put":
		rel, quoted, _ := strings.Cut(rest, " ")
		content, err := strconv.Unquote(quoted)
		if err != nil {
			tr.t.Fatalf("%s: %v", line, err)
		}
		h.put(rel, content)
	case "png", "jpeg", "gif", "webp":
		tr.image(verb, f)
	case "mkdir":
		tr.must(os.MkdirAll(h.backing(f[0]), 0o755))
	case "rm":
		tr.must(os.Remove(h.backing(f[0])))
	case "symlink":
		tr.must(os.Symlink(f[0], h.backing(f[1])))
	case "cat":
		tr.n++
		tr.out = append(tr.out, txtar.File{Name: fmt.Sprintf("%02d cat %s", tr.n, f[0]), Data: []byte(strconv.Quote(h.get(f[0])) + "\n")})
	case "call", "callin", "cancelled":
		tr.call(verb, line, rest)
	case "writing":
		pid, _ := strconv.Atoi(f[1])
		tr.mountWriters().open(f[0], versionstore.Writer{Kind: versionstore.WriterMount, Pid: uint32(pid), Comm: f[2]})
	case "closed":
		tr.mountWriters().open(f[0], versionstore.Writer{})
	default:
		tr.t.Fatalf("unknown script line %q", line)
	}
}

// mountWriters are the files the script has a process write through the
// mount, attached to the store at their first use.
func (tr *transcript) mountWriters() *scriptWriters {
	if tr.writers == nil {
		tr.writers = &scriptWriters{by: map[string]versionstore.Writer{}, released: map[string]chan struct{}{}}
		tr.h.store.AttachMount(tr.writers)
	}
	return tr.writers
}

// scriptWriters are the mount's writers as a script says: each file's
// writer, or none.
type scriptWriters struct {
	mu sync.Mutex
	by map[string]versionstore.Writer
	// released and idle are the channels handed out, closed as the
	// script closes the files.
	released map[string]chan struct{}
	idle     chan struct{}
}

// open makes w the writer of key (zero: none).
func (s *scriptWriters) open(key string, w versionstore.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w == (versionstore.Writer{}) {
		delete(s.by, key)
		if ch := s.released[key]; ch != nil {
			close(ch)
			delete(s.released, key)
		}
		if len(s.by) == 0 && s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
		return
	}
	s.by[key] = w
}

func (s *scriptWriters) Released(key string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.by[key]; !ok {
		return nil
	}
	if s.released[key] == nil {
		s.released[key] = make(chan struct{})
	}
	return s.released[key]
}

func (s *scriptWriters) Idle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.by) == 0 {
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

func (s *scriptWriters) Writing(key string) bool { _, ok := s.WrittenBy(key); return ok }
func (s *scriptWriters) Count() int              { s.mu.Lock(); defer s.mu.Unlock(); return len(s.by) }
func (s *scriptWriters) Owed() []string          { return nil }

func (s *scriptWriters) WrittenBy(key string) (versionstore.Writer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.by[key]
	return w, ok
}

func (tr *transcript) must(err error) {
	if err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *transcript) image(kind string, f []string) {
	w, _ := strconv.Atoi(f[1])
	ht, _ := strconv.Atoi(f[2])
	var b []byte
	switch kind {
	case "png":
		b = pngImage(tr.t, w, ht)
	case "jpeg":
		b = jpegImage(tr.t, w, ht)
	case "gif":
		b = gifImage(tr.t, w, ht)
	case "webp":
		b = webpImage(tr.t, w, ht, color.NRGBA{R: 10, G: 20, B: 30, A: 255})
	}
	tr.h.put(f[0], string(b))
}

// call runs a tool call line and records its result.
func (tr *transcript) call(verb, line, rest string) {
	actor, rest, _ := strings.Cut(rest, " ")
	if actor == "-" {
		actor = ""
	}
	cwd := ""
	if verb == "callin" {
		cwd, rest, _ = strings.Cut(rest, " ")
	}
	tool, args, _ := strings.Cut(rest, " ")
	ctx, cancel := context.WithCancel(context.Background())
	if verb == "cancelled" {
		cancel()
	}
	defer cancel()
	r, err := tr.h.svc.Call(ctx, tool, Request{Actor: actor, Cwd: cwd, Arguments: json.RawMessage(args)})
	if err != nil {
		r = Result{Text: "Call error: " + err.Error()}
	}
	tr.n++
	name := fmt.Sprintf("%02d %s", tr.n, tool)
	tr.out = append(tr.out,
		txtar.File{Name: name + ".text", Data: tr.scrub(r.Text + "\n")},
		txtar.File{Name: name + ".json", Data: tr.scrub(string(tr.resultJSON(r)) + "\n")})
}

// resultJSON is the whole Result the model's harness gets, Text included,
// so that the JSON pins the text's exact bytes (the .text section is
// the readable copy, with one newline added).
func (tr *transcript) resultJSON(r Result) []byte {
	b, err := json.MarshalIndent(r, "", "\t")
	if err != nil {
		tr.t.Fatal(err)
	}
	return b
}

func (tr *transcript) scrub(s string) []byte {
	s = strings.ReplaceAll(s, tr.h.mount, "$MNT")
	s = strings.ReplaceAll(s, tr.h.ws, "$WORK")
	// What is left of the test's temporary root: paths outside both.
	return []byte(strings.ReplaceAll(s, filepath.Dir(filepath.Dir(tr.h.mount)), "$TMP"))
}
