package unixsocket

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// openapi.json is valid OpenAPI 3.1, and GET /v1/openapi.json serves it.
func TestOpenAPIDocument(t *testing.T) {
	c := newAPICheck(t)
	if ok, errs := c.strict.ValidateDocument(); !ok {
		t.Fatalf("openapi.json is not valid OpenAPI: %s", describe(errs))
	}
	if c.model.Version != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", c.model.Version)
	}
	if len(c.model.Servers) != 1 || c.model.Servers[0].URL != "http://dshfs" {
		t.Errorf("servers: want exactly http://dshfs")
	}
	d := startDaemon(t, 0)
	body := c.do(d.hc, exchange{method: "GET", target: "/v1/openapi.json", code: 200, loose: true})
	if string(body) != string(openAPIDoc) {
		t.Errorf("GET /v1/openapi.json is not openapi.json")
	}
}

// The document describes exactly the routes of NewServer's table: the
// table is read from the source, so a route added to one and not the other
// fails here.
func TestOpenAPIRoutes(t *testing.T) {
	c := newAPICheck(t)
	var documented []string
	for p, item := range c.model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().KeysFromOldest() {
			documented = append(documented, strings.ToUpper(method)+" "+p)
		}
	}
	served := routeTable(t)
	slices.Sort(documented)
	slices.Sort(served)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is served but not in openapi.json", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("route %s is in openapi.json but not served", r)
		}
	}
}

// routeTable returns the patterns of the server's route table.
func routeTable(t *testing.T) []string {
	var routes []string
	for _, r := range NewServer(Config{}).routes {
		routes = append(routes, r.pattern)
	}
	if len(routes) < 10 {
		t.Fatalf("found only %d routes: %v", len(routes), routes)
	}
	return routes
}

// Every route's answers — successes, and each fault that can be caused on
// purpose — conform to openapi.json, and so does each request the daemon
// serves; each request the document calls invalid is refused. Every
// (operation, status) pair the document lists is exercised here, but for
// those in notProduced. The steps run in order on one workspace.
func TestOpenAPIConformance(t *testing.T) {
	d := startDaemon(t, 1<<20) // a small body limit: 413s are cheap
	c := &conformance{apiCheck: newAPICheck(t), d: d, hc: d.hc, bare: serveBare(t, d)}
	c.tools()
	c.history()
	c.showAndDiff()
	c.restore()
	c.checkpoints()
	c.rewind()
	c.rewindActor()
	c.collection()
	c.session()
	c.processes()
	c.mcp()
	c.noStore()
	c.branches()
	c.corruption()
	c.get("/v1/openapi.json", 200, loose)
	c.unrouted(c.hc, exchange{method: "GET", target: "/v1/nothing"})
	c.unrouted(c.hc, exchange{method: "DELETE", target: "/v1/tools"})
	c.unrouted(c.hc, exchange{method: "POST", target: "/v1/tools/read/x", body: `{}`})
	c.checkCoverage()
}

// conformance is what the conformance test's steps share.
type conformance struct {
	*apiCheck
	d        *daemon
	hc, bare *http.Client   // the daemon, and one serving the same tools without a store
	f        []HistoryEntry // f.txt's versions, newest first
}

type option func(*exchange)

var (
	bad     option = func(ex *exchange) { ex.bad = true }
	chunked option = func(ex *exchange) { ex.chunked = true }
	loose   option = func(ex *exchange) { ex.loose = true }
)

func (c *conformance) send(ex exchange, opts []option) []byte {
	c.t.Helper()
	for _, o := range opts {
		o(&ex)
	}
	return c.do(c.hc, ex)
}

func (c *conformance) get(target string, code int, opts ...option) []byte {
	c.t.Helper()
	return c.send(exchange{method: "GET", target: target, code: code}, opts)
}

func (c *conformance) post(target, body string, code int, opts ...option) []byte {
	c.t.Helper()
	return c.send(exchange{method: "POST", target: target, body: body, code: code}, opts)
}

// tool calls a tool; write and edit results are checked loosely (see
// apiCheck.loose).
func (c *conformance) tool(name, body string, code int, opts ...option) ToolResult {
	c.t.Helper()
	if name == "write" || name == "edit" {
		opts = append(opts, loose)
	}
	var r ToolResult
	if b := c.post("/v1/tools/"+name, body, code, opts...); code == 200 {
		if err := json.Unmarshal(b, &r); err != nil {
			c.t.Fatalf("%s: %v", b, err)
		}
	}
	return r
}

func (c *conformance) ws(rel string) string { return filepath.Join(c.d.ws, rel) }

// tools: every tool, successes and tool errors, with a length and chunked;
// then the protocol faults.
func (c *conformance) tools() {
	c.tool("write", `{"actor":"a","arguments":{"file_path":"f.txt","content":"one\n"}}`, 200)
	c.tool("read", `{"actor":"a","arguments":{"file_path":"f.txt"}}`, 200)
	c.tool("edit", `{"actor":"a","arguments":{"file_path":"f.txt","old_string":"one","new_string":"two"}}`, 200)
	c.tool("write", `{"actor":"a","cwd":"`+c.d.ws+`","arguments":{"file_path":"f.txt","content":"three\n"}}`, 200, chunked)
	writePNG(c.t, c.ws("p.png"))
	c.tool("read_image", `{"actor":"a","arguments":{"file_path":"p.png"}}`, 200)
	if r := c.tool("read", `{"arguments":{"file_path":"missing.txt"}}`, 200); !r.IsError || r.Error.Code != "FS_NOT_FOUND" {
		c.t.Errorf("read of a missing file: %+v", r)
	}
	if r := c.tool("read", `{"arguments":{"file_path":1}}`, 200, chunked); !r.IsError || r.Error.Code != "" {
		c.t.Errorf("read with a wrong argument type: %+v", r)
	}
	os.WriteFile(c.ws("f.txt"), []byte("four\n"), 0o644) // behind dshfs's back
	if r := c.tool("edit", `{"actor":"a","arguments":{"file_path":"f.txt","old_string":"four","new_string":"x"}}`, 200); r.Error == nil || r.Error.Code != "FS_STALE_VERSION" {
		c.t.Errorf("stale edit: %+v", r)
	}
	c.tool("read", `{"actor":"a","arguments":{"file_path":"f.txt"}}`, 200)
	c.tool("write", `{"actor":"a","arguments":{"file_path":"f.txt","content":"five\n"}}`, 200)

	c.tool("read", `{"arguments":`, 400, bad)
	c.tool("read", `{"arguments":`, 400, bad, chunked)
	c.tool("nope", `{"arguments":{}}`, 404, bad)
	big := `{"arguments":{"file_path":"big","content":"` + strings.Repeat("x", 2<<20) + `"}}`
	c.tool("write", big, 413)
	c.tool("write", big, 413, chunked)

	var defs []ToolDef
	json.Unmarshal(c.get("/v1/tools", 200), &defs)
	c.toolNamesMatch(defs)
	c.get("/v1/status", 200)                                               // actors named
	c.get("/v1/status?fields=mount", 200)                                  // where it serves, no counts
	c.do(c.bare, exchange{method: "GET", target: "/v1/status", code: 200}) // none: recent is null
}

func (c *conformance) history() {
	json.Unmarshal(c.get("/v1/history?path=f.txt", 200), &c.f)
	if len(c.f) != 5 || c.f[1].Writer.Kind != versionstore.WriterExternal {
		c.t.Fatalf("history of f.txt: %+v", c.f)
	}
	c.get("/v1/history?path=never.txt&cwd="+c.d.ws, 200)
	c.get("/v1/history", 400, bad)
	c.get("/v1/history?path=../x", 400)
}

func (c *conformance) showAndDiff() {
	newest, external, oldest := c.version(0), c.version(1), c.version(-1)
	c.get("/v1/show?path=f.txt&version="+newest, 200)
	c.get("/v1/show?path=f.txt&version="+oldest[3:11], 200)
	c.get("/v1/show?path=f.txt&version="+external, 200) // kept by the write over it
	c.get("/v1/show?path=f.txt", 400, bad)
	c.get("/v1/show?path=f.txt&version=zz", 400)
	c.get("/v1/show?path=f.txt&version="+absentPrefix(c.f), 404)
	c.get("/v1/show?path=f.txt&version="+versionstore.SumString("never\n").String(), 404) // not kept

	c.get("/v1/diff?path=f.txt", 200)
	c.get("/v1/diff?path=f.txt&max_bytes=40", 200)
	c.get("/v1/diff?path=f.txt&from="+oldest+"&to="+newest[3:11], 200)
	c.get("/v1/diff", 400) // neither a path nor since
	c.get("/v1/diff?path=f.txt&to="+newest, 400)
	c.get("/v1/diff?path=p.png", 404) // one version
	c.get("/v1/diff?path=f.txt&from="+absentPrefix(c.f), 404)
}

// version is f.txt's i-th version, newest first; -1 the oldest.
func (c *conformance) version(i int) string {
	if i < 0 {
		i += len(c.f)
	}
	return c.f[i].Version.String()
}

func (c *conformance) restore() {
	newest, oldest := c.version(0), c.version(-1)
	c.post("/v1/restore", `{"path":"f.txt","version":"`+oldest+`","actor":"a"}`, 200)
	c.post("/v1/restore", `{"path":"f.txt","version":"`+oldest[3:11]+`","cwd":"`+c.d.ws+`"}`, 200) // already there
	c.post("/v1/restore", `{"path":"f.txt"}`, 400, bad)
	c.post("/v1/restore", `{"path":`, 400, bad)
	c.post("/v1/restore", `{"path":"f.txt","version":"`+newest+`","actor":"a\u0000b"}`, 400, bad)
	c.post("/v1/restore", `{"path":"f.txt","version":"`+newest+`","actor":"`+strings.Repeat("x", 300)+`"}`, 400, bad)
	c.post("/v1/restore", `{"path":"../f.txt","version":"`+newest+`"}`, 400)
	c.post("/v1/restore", `{"path":"f.txt","version":"`+absentPrefix(c.f)+`"}`, 404)
	c.d.store.AttachMount(writingOnly("f.txt")) // as the mount says while a process writes it
	c.post("/v1/restore", `{"path":"f.txt","version":"`+newest+`"}`, 409)
	c.d.store.AttachMount(nil)
	c.post("/v1/restore", `{"path":"f.txt","version":"`+newest+`"`+strings.Repeat(" ", 2<<20)+`}`, 413)
}

func (c *conformance) checkpoints() {
	c.post("/v1/checkpoints", `{"name":"before"}`, 200)
	c.post("/v1/checkpoints", `{}`, 200)
	c.post("/v1/checkpoints", `{"name":"before"}`, 400) // taken
	c.post("/v1/checkpoints", `{"name":"a/b"}`, 400, bad)
	c.post("/v1/checkpoints", `{"name":`, 400, bad)
	c.post("/v1/checkpoints", `{"name":"x"`+strings.Repeat(" ", 2<<20)+`}`, 413)
	c.send(exchange{method: "POST", target: "/v1/checkpoints", body: `{"name":"streamed"}`, code: 200,
		header: map[string]string{"Accept": "application/x-ndjson"}}, nil)
	c.get("/v1/checkpoints", 200)
	c.post("/v1/checkpoints", `{"name":"gone"}`, 200)
	c.send(exchange{method: "DELETE", target: "/v1/checkpoints/gone", code: 200}, nil)
	c.send(exchange{method: "DELETE", target: "/v1/checkpoints/gone", code: 404}, nil)
}

// rewind to "before": a dry run, then one with a conflict, then its undo.
func (c *conformance) rewind() {
	c.tool("read", `{"actor":"a","arguments":{"file_path":"f.txt"}}`, 200) // restored since a wrote it
	c.tool("write", `{"actor":"a","arguments":{"file_path":"f.txt","content":"six\n"}}`, 200)
	c.tool("write", `{"actor":"a","arguments":{"file_path":"new.txt","content":"new\n"}}`, 200)
	c.tool("write", `{"actor":"a","arguments":{"file_path":"busy.txt","content":"busy\n"}}`, 200)
	want := []string{"busy.txt remove", "f.txt restore", "new.txt remove"}
	if r := c.rewindTo(`{"checkpoint":"before","dry_run":true}`); !slices.Equal(actions(r), want) || !r.DryRun {
		c.t.Errorf("dry run: %+v", r)
	}
	c.d.store.AttachMount(writingOnly("busy.txt")) // a conflict: left alone, with an error
	r := c.rewindTo(`{"checkpoint":"before","actor":"a"}`)
	c.d.store.AttachMount(nil)
	if !slices.Equal(actions(r), want) || r.Conflicts != 1 || r.Before == "" {
		c.t.Errorf("rewind: %+v", r)
	}
	var h []HistoryEntry
	json.Unmarshal(c.get("/v1/history?path=new.txt", 200), &h)
	if len(h) == 0 || !h[0].Deleted || !h[0].Version.IsZero() {
		c.t.Errorf("history of a file the rewind removed: %+v", h)
	}
	if r = c.rewindTo(`{"checkpoint":"` + r.Before + `"}`); !slices.Equal(actions(r), []string{"f.txt restore", "new.txt recreate"}) {
		c.t.Errorf("undoing the rewind: %+v", r)
	}
	c.post("/v1/rewind", `{"checkpoint":"nope"}`, 404)
	c.post("/v1/rewind", `{}`, 400, bad)
	c.post("/v1/rewind", `{"checkpoint":"before","actor":"\u0000"}`, 400, bad)
	c.post("/v1/rewind", `{"checkpoint":`, 400, bad)
	c.post("/v1/rewind", `{"checkpoint":"before"`+strings.Repeat(" ", 2<<20)+`}`, 413)
}

// rewindActor undoes one actor's changes since a checkpoint: the file
// only a made goes, b's stays; a file b changed after a is a conflict
// that, without partial, refuses the whole rewind.
func (c *conformance) rewindActor() {
	c.post("/v1/checkpoints", `{"name":"agents"}`, 200)
	c.tool("write", `{"actor":"b","arguments":{"file_path":"by-b.txt","content":"b\n"}}`, 200)
	c.tool("write", `{"actor":"a","arguments":{"file_path":"by-a.txt","content":"a\n"}}`, 200)
	c.tool("write", `{"actor":"a","arguments":{"file_path":"both.txt","content":"a\n"}}`, 200)
	c.tool("read", `{"actor":"b","arguments":{"file_path":"both.txt"}}`, 200)
	c.tool("write", `{"actor":"b","arguments":{"file_path":"both.txt","content":"b\n"}}`, 200, loose)
	r := c.rewindTo(`{"checkpoint":"agents","only_actor":"a"}`)
	if !slices.Equal(actions(r), []string{"both.txt remove", "by-a.txt remove"}) || !r.Refused || r.Conflicts != 1 || r.Before != "" {
		c.t.Errorf("rewind of a's changes, refused: %+v", r)
	}
	r = c.rewindTo(`{"checkpoint":"agents","only_actor":"a","partial":true}`)
	if !slices.Equal(actions(r), []string{"both.txt remove", "by-a.txt remove"}) || r.Refused || r.Conflicts != 1 || r.Actor != "a" {
		c.t.Errorf("rewind of a's changes, partial: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(c.d.ws, "by-b.txt")); string(b) != "b\n" {
		c.t.Errorf("b's file after a's changes were undone: %q", b)
	}
	c.post("/v1/rewind", `{"checkpoint":"agents","only_actor":"\u0000"}`, 400, bad)
}

// rewindTo runs a rewind that succeeds and returns its result line's.
func (c *conformance) rewindTo(body string) RewindResult {
	c.t.Helper()
	b := bytes.TrimSpace(c.post("/v1/rewind", body, 200))
	var line struct{ Result RewindResult }
	json.Unmarshal(b[bytes.LastIndexByte(b, '\n')+1:], &line)
	return line.Result
}

// actions lists a rewind's actions as "path op", sorted.
func actions(r RewindResult) []string {
	var out []string
	for _, a := range r.Actions {
		out = append(out, a.Path+" "+a.Op)
	}
	slices.Sort(out)
	return out
}

func (c *conformance) collection() {
	c.post("/v1/gc", `{}`, 200)
	c.send(exchange{method: "POST", target: "/v1/gc", code: 200}, nil) // no body
}

// session: the workspace's log, and one diff of its changes since a
// checkpoint or a time.
func (c *conformance) session() {
	c.get("/v1/log", 200)
	c.get("/v1/log?since=before&limit=2", 200)
	c.get("/v1/log?since=30m&path=f.txt&path=new.txt", 200)
	c.get("/v1/log?since=no-such-thing", 404)
	c.get("/v1/log?path=sub%2Fx", 200)
	c.get("/v1/log?path=..%2Fx", 400)
	c.get("/v1/diff?since=before", 200)
	c.get("/v1/diff?since=before&path=f.txt&path=new.txt", 200)
	c.get("/v1/diff?since=no-such-thing", 404)
	c.get("/v1/diff?since=before&path=..%2Fx", 400)
}

// processes: a harness registers the process that runs its shell.
func (c *conformance) processes() {
	pid := strconv.Itoa(os.Getpid())
	c.post("/v1/actors/harness-1/processes", `{"pid":`+pid+`}`, 200)
	c.post("/v1/actors/harness-1/processes", `{"pid":0}`, 400, bad)
	c.post("/v1/actors/harness-1/processes", `{"pid":`, 400, bad)
	c.post("/v1/actors/harness-1/processes", `{"pid":1`+strings.Repeat(" ", 2<<20)+`}`, 413)
	c.do(c.bare, exchange{method: "POST", target: "/v1/actors/harness-1/processes", body: `{"pid":` + pid + `}`, code: 404})
}

// mcp: the refusals of a session hand-over (the hand-over itself passes
// descriptors, which only a real dshfs mcp does).
func (c *conformance) mcp() {
	upgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "dshfs-mcp-fds"}
	c.send(exchange{method: "POST", target: "/v1/mcp", body: `{"actor":"a\u0000"}`, code: 400, bad: true, header: upgrade}, nil)
	c.send(exchange{method: "POST", target: "/v1/mcp", body: `{"actor":"a"}`, code: 404, header: upgrade}, nil)
	c.send(exchange{method: "POST", target: "/v1/mcp", body: `{"actor":"a"` + strings.Repeat(" ", 2<<20) + `}`, code: 413, header: upgrade}, nil)
}

// noStore: a daemon without a version store serves no checkpoints.
func (c *conformance) noStore() {
	c.do(c.bare, exchange{method: "GET", target: "/v1/checkpoints", code: 404})
	c.do(c.bare, exchange{method: "POST", target: "/v1/checkpoints", body: `{}`, code: 404})
	c.do(c.bare, exchange{method: "POST", target: "/v1/rewind", body: `{"checkpoint":"before"}`, code: 404})
	c.do(c.bare, exchange{method: "POST", target: "/v1/gc", body: `{}`, code: 404})
}

// corruption: damaged kept bytes are a 500, never returned.
func (c *conformance) corruption() {
	oldest := c.version(-1)
	corrupt(c.t, c.d.store, oldest)
	c.get("/v1/show?path=f.txt&version="+oldest, 500)
	c.get("/v1/diff?path=f.txt&from="+oldest, 500)
	c.post("/v1/restore", `{"path":"f.txt","version":"`+oldest+`"}`, 500)
}

// writingOnly stands in for a mount writing one file.
type writingOnly string

func (w writingOnly) Writing(key string) bool { return key == string(w) }
func (w writingOnly) Count() int              { return 1 }
func (w writingOnly) Owed() []string          { return []string{string(w)} }

// Released and Idle never close: the file stays being written.
func (w writingOnly) Released(key string) <-chan struct{} {
	if key != string(w) {
		return nil
	}
	return make(chan struct{})
}
func (w writingOnly) Idle() <-chan struct{} { return make(chan struct{}) }
