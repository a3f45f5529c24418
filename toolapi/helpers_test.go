package toolapi

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/versionstore"
)

// agent is the actor most tests call as.
const agent = "agent"

// harness is one workspace served by the tools: a backing directory, a
// mount point that only exists as a name (display paths live under it while
// the files live in the backing directory), a real bbolt index outside both,
// and the Store, Policy and Service over them.
type harness struct {
	t     *testing.T
	ws    string // backing directory, real absolute path
	mount string // fake absolute mount point; never created
	index string // bbolt file
	cfg   Config
	bare  bool
	// syncPublishes syncs every publish before its commit: no settler
	// commits after the acknowledgement (versionstore's settle.go).
	syncPublishes bool

	store *versionstore.Store
	pol   *policy.Policy // nil in the bare deployment
	svc   *Service
}

// harnessOption adjusts a harness before it opens.
type harnessOption func(*harness)

// withConfig sets the read limits; MountPoint is always the harness's own.
func withConfig(c Config) harnessOption { return func(h *harness) { h.cfg = c } }

// bareProvider serves the tools without a policy, like `dshfs mount --no-policy`.
func bareProvider() harnessOption { return func(h *harness) { h.bare = true } }

// newHarness opens a fresh workspace; everything is closed in t.Cleanup.
func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t:     t,
		ws:    ws,
		mount: filepath.Join(t.TempDir(), "mnt"),
		index: filepath.Join(t.TempDir(), "state", "index.db"),
	}
	for _, o := range opts {
		o(h)
	}
	h.open()
	return h
}

// open opens the store, policy and service over the harness's files.
func (h *harness) open() {
	h.t.Helper()
	st, err := versionstore.Open(h.ws, h.index, versionstore.Options{AliasRoots: []string{h.mount}, SyncPublishes: h.syncPublishes})
	if err != nil {
		h.t.Fatalf("open store: %v", err)
	}
	h.t.Cleanup(func() {
		if err := st.Close(); err != nil {
			h.t.Errorf("close store: %v", err)
		}
	})
	h.store, h.pol = st, nil
	if !h.bare {
		if h.pol, err = policy.New(st.Observations(), policy.Options{}); err != nil {
			h.t.Fatalf("open policy: %v", err)
		}
	}
	cfg := h.cfg
	cfg.MountPoint = h.mount
	if h.svc, err = New(st, h.pol, cfg); err != nil {
		h.t.Fatalf("new service: %v", err)
	}
}

// reopen closes everything and opens it again over the same files, as a
// daemon restart would.
func (h *harness) reopen() {
	h.t.Helper()
	if err := h.store.Close(); err != nil {
		h.t.Fatalf("close store: %v", err)
	}
	h.open()
}

// in returns the harness for use inside subtest t, so that its helpers
// fail the goroutine that is running.
func (h *harness) in(t *testing.T) *harness {
	c := *h
	c.t = t
	return &c
}

// disp is the display path of a workspace-relative path: under the mount point.
func (h *harness) disp(rel string) string { return filepath.Join(h.mount, rel) }

// backing is the path of rel in the backing directory.
func (h *harness) backing(rel string) string { return filepath.Join(h.ws, rel) }

// call runs tool name as actor with args, which is either a JSON string or
// a value to marshal.
func (h *harness) call(name, actor string, args any) Result {
	h.t.Helper()
	return h.callReq(name, Request{Actor: actor, Arguments: rawArgs(h.t, args)})
}

// callIn is call with a request cwd.
func (h *harness) callIn(name, actor, cwd string, args any) Result {
	h.t.Helper()
	return h.callReq(name, Request{Actor: actor, Cwd: cwd, Arguments: rawArgs(h.t, args)})
}

func (h *harness) callReq(name string, req Request) Result {
	h.t.Helper()
	r, err := h.svc.Call(context.Background(), name, req)
	if err != nil {
		h.t.Fatalf("Call(%s): %v", name, err)
	}
	return r
}

func rawArgs(t *testing.T, args any) json.RawMessage {
	t.Helper()
	if s, ok := args.(string); ok {
		return json.RawMessage(s)
	}
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Shorthands for the three tools, as actor.

func (h *harness) read(actor, path string) Result {
	h.t.Helper()
	return h.call(ToolRead, actor, map[string]any{"file_path": path})
}

func (h *harness) write(actor, path, content string) Result {
	h.t.Helper()
	return h.call(ToolWrite, actor, map[string]any{"file_path": path, "content": content})
}

func (h *harness) edit(actor, path, old, new string) Result {
	h.t.Helper()
	return h.call(ToolEdit, actor, map[string]any{"file_path": path, "old_string": old, "new_string": new})
}

// put writes content into the backing directory directly, behind the
// store's back, creating parents.
func (h *harness) put(rel, content string) {
	h.t.Helper()
	putFile(h.t, h.backing(rel), content)
}

func putFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// get returns the bytes of rel in the backing directory.
func (h *harness) get(rel string) string {
	h.t.Helper()
	return getFile(h.t, h.backing(rel))
}

func getFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	return string(b)
}

// mustNotExist fails unless nothing (not even a dangling link) is at path.
func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s exists (lstat err %v), want nothing there", path, err)
	}
}

// mustOK fails unless r succeeded.
func mustOK(t *testing.T, r Result) {
	t.Helper()
	if r.IsError || r.Error != nil {
		t.Fatalf("call failed: %q (error %+v)", r.Text, r.Error)
	}
}

// mustText fails unless r succeeded with exactly text.
func mustText(t *testing.T, r Result, text string) {
	t.Helper()
	mustOK(t, r)
	if r.Text != text {
		t.Fatalf("text:\n got %q\nwant %q", r.Text, text)
	}
}

// mustFail fails unless r is the error message with code ("" for the reference
// implementation's uncoded argument errors), and the model saw exactly
// "Error: " + message.
func mustFail(t *testing.T, r Result, code versionstore.Code, message string) {
	t.Helper()
	if !r.IsError || r.Error == nil {
		t.Fatalf("call succeeded with %q, want error %s %q", r.Text, code, message)
	}
	if r.Error.Code != string(code) || r.Error.Message != message {
		t.Fatalf("error:\n got %s %q\nwant %s %q", r.Error.Code, r.Error.Message, code, message)
	}
	if want := "Error: " + message; r.Text != want {
		t.Fatalf("text:\n got %q\nwant %q", r.Text, want)
	}
	if r.Value != nil {
		t.Fatalf("failed call carries a value: %#v", r.Value)
	}
}

// mustJSONValue fails unless r's value marshals to exactly want.
func mustJSONValue(t *testing.T, r Result, want string) {
	t.Helper()
	mustOK(t, r)
	b, err := json.Marshal(r.Value)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("value JSON:\n got %s\nwant %s", b, want)
	}
}

// readVersion returns the version a successful read reported.
func readVersion(t *testing.T, r Result) versionstore.Version {
	t.Helper()
	mustOK(t, r)
	v, ok := r.Value.(ReadValue)
	if !ok {
		t.Fatalf("read value is %T, want ReadValue", r.Value)
	}
	return v.Version
}

// Remedy suffixes the reference implementation appends to write and edit
// errors.
const (
	reRead  = " — re-read the file, then retry"
	readNow = " — read the file, then retry"
)

// fileBlock is the text of a successful write.
func fileBlock(display, body string) string {
	return "<path>" + display + "</path>\n<type>file</type>\n<content>\n" + body + "\n</content>"
}
