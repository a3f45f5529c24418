package toolapi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// The reference implementation's schemas (its tool-fs package), compact JSON
// with properties in order.
const (
	readSchemaFmt = `{"type":"object","properties":{` +
		`"file_path":{"type":"string","description":"Path to read, resolved by the filesystem backend."},` +
		`"offset":{"type":"number","description":"1-based first line to return. Defaults to 1."},` +
		`"limit":{"type":"number","description":"Maximum number of lines to return. Defaults to %s."}},` +
		`"required":["file_path"]}`
	writeSchema = `{"type":"object","properties":{` +
		`"file_path":{"type":"string","description":"Path to write, resolved by the filesystem backend."},` +
		`"content":{"type":"string","description":"Full UTF-8 text content to write."}},` +
		`"required":["file_path","content"]}`
	readImageSchema = `{"type":"object","properties":{` +
		`"file_path":{"type":"string","description":"Path to the image file, resolved by the filesystem backend."}},` +
		`"required":["file_path"]}`
	editSchema = `{"type":"object","properties":{` +
		`"file_path":{"type":"string","description":"Path to edit, resolved by the filesystem backend."},` +
		`"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},` +
		`"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},` +
		`"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."}},` +
		`"required":["file_path","old_string","new_string"]}`
)

func readSchema(limit string) string { return strings.Replace(readSchemaFmt, "%s", limit, 1) }

// The reference implementation's tool descriptions (its tool-fs package), which
// each dshfs description begins with.
const (
	descRead      = "Read a UTF-8 text file and return line-numbered content."
	descReadImage = "Read a PNG/JPEG/WebP/GIF file and return the image itself. Requires the current model to accept image input."
	descWrite     = "Create or fully replace a UTF-8 text file."
	descEdit      = "Edit an existing UTF-8 text file by replacing literal text."
)

// relativeTo is the sentence that says what a relative file_path is
// relative to.
func relativeTo(dir string) string { return " A relative file_path is relative to " + dir + "." }

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A model is told what a write or an edit needs first, where relative paths
// lead, and where images are read; a bare deployment needs no read first.
// Each description still begins with the reference implementation's.
func TestToolDescriptionsSayWhatTheyNeed(t *testing.T) {
	h := newHarness(t)
	h.put("sub/f.txt", "x\n")
	sub := h.disp("sub")
	got := h.svc.ToolsIn(sub)
	for i, want := range []string{descRead + relativeTo(sub) + " For a PNG/JPEG/WebP/GIF image use read_image: read refuses it as a binary file.",
		descReadImage + relativeTo(sub),
		descWrite + relativeTo(sub) + " To replace an existing file, read it first in this session (unless this session just wrote or edited it); a new file needs no read.",
		descEdit + relativeTo(sub) + " Read the file first in this session, unless this session just wrote or edited it."} {
		if got[i].Description != want {
			t.Errorf("%s in sub/:\n got %q\nwant %q", got[i].Name, got[i].Description, want)
		}
	}
	bare := newHarness(t, bareProvider()).svc.Tools()
	for _, d := range bare {
		if strings.Contains(d.Description, "first") {
			t.Errorf("bare %s asks for a read first: %q", d.Name, d.Description)
		}
	}
	for i, d := range Definitions(DefaultReadLimit) {
		if want := relativeTo("the session's working directory (by default the mount point)"); !strings.Contains(d.Description, want) {
			t.Errorf("%s without a mount: %q, want %q in it", d.Name, d.Description, want)
		}
		if ref := []string{descRead, descReadImage, descWrite, descEdit}[i]; !strings.HasPrefix(d.Description, ref) {
			t.Errorf("%s: %q does not begin with the reference implementation's %q", d.Name, d.Description, ref)
		}
	}
}

func TestToolsDefinitions(t *testing.T) {
	h := newHarness(t)
	want := []struct{ name, description, schema string }{
		{"read", descRead + relativeTo(h.mount) + " For a PNG/JPEG/WebP/GIF image use read_image: read refuses it as a binary file.", readSchema("2000")},
		{"read_image", descReadImage + relativeTo(h.mount), readImageSchema},
		{"write", descWrite + relativeTo(h.mount) + " To replace an existing file, read it first in this session (unless this session just wrote or edited it); a new file needs no read.", writeSchema},
		{"edit", descEdit + relativeTo(h.mount) + " Read the file first in this session, unless this session just wrote or edited it.", editSchema},
	}
	got := h.svc.Tools()
	if len(got) != len(want) {
		t.Fatalf("Tools() has %d tools, want %d", len(got), len(want))
	}
	annotations := map[string]Annotations{"read": {ReadOnly: true}, "read_image": {ReadOnly: true},
		"write": {Destructive: true, Idempotent: true}, "edit": {Destructive: true}}
	for i, w := range want {
		g := got[i]
		if g.Annotations != annotations[g.Name] || g.Title == "" {
			t.Errorf("%s: title %q, annotations %+v; want a title and %+v", g.Name, g.Title, g.Annotations, annotations[g.Name])
		}
		if g.Name != w.name || g.Description != w.description || string(g.InputSchema) != w.schema {
			t.Errorf("tool %d:\n got %s %q %s\nwant %s %q %s", i, g.Name, g.Description, g.InputSchema, w.name, w.description, w.schema)
		}
		if !json.Valid(g.InputSchema) {
			t.Errorf("%s schema is not valid JSON", g.Name)
		}
	}
	// The wire form (GET /v1/tools) keeps the schema bytes and uses these keys.
	b, err := json.Marshal(got[2])
	if err != nil {
		t.Fatal(err)
	}
	wantWire := `{"name":"write","description":` + jsonQuote(want[2].description) + `,"input_schema":` + writeSchema +
		`,"title":"Write File","annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":true,"openWorldHint":false}}`
	if string(b) != wantWire {
		t.Errorf("wire form:\n got %s\nwant %s", b, wantWire)
	}
}

func TestToolsBareDeploymentSameSchemas(t *testing.T) {
	h := newHarness(t, bareProvider())
	got := h.svc.Tools()
	if len(got) != 4 || string(got[0].InputSchema) != readSchema("2000") || string(got[1].InputSchema) != readImageSchema ||
		string(got[2].InputSchema) != writeSchema || string(got[3].InputSchema) != editSchema {
		t.Fatalf("bare deployment tools differ: %+v", got)
	}
}

func TestUnknownTool(t *testing.T) {
	h := newHarness(t)
	_, err := h.svc.Call(context.Background(), "glob", Request{Actor: agent, Arguments: json.RawMessage(`{"pattern":"*"}`)})
	if !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("Call(glob) error = %v, want ErrUnknownTool", err)
	}
}

func TestConfigReadLimit(t *testing.T) {
	h := newHarness(t, withConfig(Config{ReadLimit: 2}))
	if got := string(h.svc.Tools()[0].InputSchema); got != readSchema("2") {
		t.Fatalf("read schema:\n got %s\nwant %s", got, readSchema("2"))
	}
	h.put("f.txt", "a\nb\nc\nd\n")
	mustText(t, h.read(agent, "f.txt"), fileBlock(h.disp("f.txt"),
		"1: a\n2: b\n\n(Showing lines 1-2 of 4. Use offset=3 to continue.)"))
	mustFail(t, h.call(ToolRead, agent, map[string]any{"file_path": "f.txt", "limit": 3}), "",
		"limit must be less than or equal to 2")
	mustText(t, h.call(ToolRead, agent, map[string]any{"file_path": "f.txt", "offset": 3, "limit": 2}), fileBlock(h.disp("f.txt"),
		"3: c\n4: d\n\n(End of file - total 4 lines)"))
}

func TestConfigReadMaxLineLength(t *testing.T) {
	h := newHarness(t, withConfig(Config{ReadMaxLineLength: 4}))
	h.put("f.txt", "abcdefgh\nabcd\n")
	mustText(t, h.read(agent, "f.txt"), fileBlock(h.disp("f.txt"),
		"1: abcd... (line truncated to 4 chars)\n2: abcd\n\n(End of file - total 2 lines)"))
}

func TestConfigReadMaxBytes(t *testing.T) {
	h := newHarness(t, withConfig(Config{ReadMaxBytes: 9}))
	h.put("f.txt", "aaaa\nbbbb\ncccc")
	r := h.read(agent, "f.txt")
	mustText(t, r, fileBlock(h.disp("f.txt"),
		"1: aaaa\n2: bbbb\n\n(Output capped. Showing lines 1-2. Use offset=3 to continue.)"))
	if v := r.Value.(ReadValue); v.TotalLines != 3 || len(v.Lines) != 2 {
		t.Fatalf("value = %+v, want 2 lines of 3", v)
	}
	mustText(t, h.call(ToolRead, agent, map[string]any{"file_path": "f.txt", "offset": 3}), fileBlock(h.disp("f.txt"),
		"3: cccc\n\n(End of file - total 3 lines)"))
}

func TestConfigDefaults(t *testing.T) {
	h := newHarness(t)
	if h.svc.cfg.ReadLimit != 2000 || h.svc.cfg.ReadMaxLineLength != 2000 || h.svc.cfg.ReadMaxBytes != 51200 {
		t.Fatalf("defaults = %+v, want 2000/2000/51200", h.svc.cfg)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	st, err := versionstore.Open(t.TempDir(), filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{ReadLimit: -1}, "tool-fs: readLimit must be a positive integer"},
		{Config{ReadMaxLineLength: -4}, "tool-fs: readMaxLineLength must be a positive integer"},
		{Config{ReadMaxBytes: -9}, "tool-fs: readMaxBytes must be a positive integer"},
		{Config{ReadLimit: -1, ReadMaxBytes: -1}, "tool-fs: readLimit must be a positive integer"},
		{Config{MountPoint: "relative/mnt"}, `toolapi: mount point "relative/mnt" must be absolute`},
	}
	for _, tc := range tests {
		svc, err := New(st, nil, tc.cfg)
		if err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v) = %v, %v; want error %q", tc.cfg, svc, err, tc.want)
		}
	}
}

func TestReadExactText(t *testing.T) {
	h := newHarness(t)
	h.put("f.txt", "hello\nworld")
	r := h.read(agent, "f.txt")
	mustText(t, r, "<path>"+h.disp("f.txt")+"</path>\n<type>file</type>\n<content>\n"+
		"1: hello\n2: world\n\n(End of file - total 2 lines)\n</content>")
	v := r.Value.(ReadValue)
	want := ReadValue{Path: h.disp("f.txt"), Offset: 1, Lines: []Line{{1, "hello"}, {2, "world"}}, TotalLines: 2,
		Version: versionstore.SumString("hello\nworld")}
	if v.Path != want.Path || v.Offset != want.Offset || v.TotalLines != want.TotalLines || v.Version != want.Version ||
		len(v.Lines) != 2 || v.Lines[0] != want.Lines[0] || v.Lines[1] != want.Lines[1] {
		t.Fatalf("value:\n got %+v\nwant %+v", v, want)
	}
}

func TestReadEmptyFile(t *testing.T) {
	h := newHarness(t)
	h.put("empty.txt", "")
	r := h.read(agent, "empty.txt")
	mustText(t, r, fileBlock(h.disp("empty.txt"), "(End of file - total 0 lines)"))
	mustJSONValue(t, r, `{"path":"`+h.disp("empty.txt")+`","offset":1,"lines":[],"totalLines":0,"version":"`+
		versionstore.SumString("").String()+`"}`)
	// Offset 2 of an empty file is out of range; offset 1 is not.
	mustFail(t, h.call(ToolRead, agent, map[string]any{"file_path": "empty.txt", "offset": 2}), versionstore.CodeNotFound,
		`offset 2 is out of range for "`+h.disp("empty.txt")+`" (0 lines)`)
}

func TestReadArgumentErrors(t *testing.T) {
	h := newHarness(t)
	h.put("f.txt", "x\n")
	tests := []struct {
		args string
		want string
	}{
		{`{"file_path":"f.txt","offset":0}`, "offset must be a positive integer"},
		{`{"file_path":"f.txt","offset":1.5}`, "offset must be a positive integer"},
		{`{"file_path":"f.txt","offset":-1}`, "offset must be a positive integer"},
		{`{"file_path":"f.txt","limit":0}`, "limit must be a positive integer"},
		{`{"file_path":"f.txt","limit":-3}`, "limit must be a positive integer"},
		{`{"file_path":"f.txt","limit":2.5}`, "limit must be a positive integer"},
		{`{"file_path":"f.txt","limit":99999}`, "limit must be less than or equal to 2000"},
		{`{"file_path":"f.txt","limit":2001}`, "limit must be less than or equal to 2000"},
		{`{"file_path":""}`, "file_path must be a non-empty string"},
		{`{"file_path":"   "}`, "file_path must be a non-empty string"},
		{`{"file_path":"\t\n "}`, "file_path must be a non-empty string"},
		// The checks run in the reference implementation's order.
		{`{"file_path":" ","offset":0,"limit":0}`, "file_path must be a non-empty string"},
		{`{"file_path":"f.txt","offset":0,"limit":0}`, "offset must be a positive integer"},
		{`{"file_path":"f.txt","offset":1.5,"limit":99999}`, "offset must be a positive integer"},
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			h := h.in(t)
			mustFail(t, h.call(ToolRead, agent, tc.args), "", tc.want)
		})
	}
	// The limit bound is inclusive, and an integral float is an integer.
	mustOK(t, h.call(ToolRead, agent, `{"file_path":"f.txt","offset":1.0,"limit":2000}`))
}

func TestSchemaViolations(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		tool, args, want string
	}{
		{ToolRead, `{}`, `invalid arguments: missing required property "file_path"`},
		{ToolRead, `null`, `invalid arguments: missing required property "file_path"`},
		{ToolRead, `{"file_path":"f.txt","offset":"1"}`, `invalid arguments: "offset" must be a number`},
		{ToolRead, `{"file_path":"f.txt","limit":true}`, `invalid arguments: "limit" must be a number`},
		{ToolRead, `{"file_path":7}`, `invalid arguments: "file_path" must be a string`},
		{ToolRead, `{"file_path":null}`, `invalid arguments: "file_path" must be a string`},
		{ToolRead, `{"offset":"x"}`, `invalid arguments: missing required property "file_path"; "offset" must be a number`},
		{ToolRead, `{"file_path":"f.txt","offset":"1","limit":"2"}`, `invalid arguments: "offset" must be a number; "limit" must be a number`},
		{ToolWrite, `{"file_path":"f.txt"}`, `invalid arguments: missing required property "content"`},
		{ToolWrite, `{"file_path":"f.txt","content":5}`, `invalid arguments: "content" must be a string`},
		{ToolWrite, `{}`, `invalid arguments: missing required property "file_path"; missing required property "content"`},
		{ToolEdit, `{"file_path":"f.txt","old_string":"a","new_string":"b","replace_all":"yes"}`, `invalid arguments: "replace_all" must be a boolean`},
		{ToolEdit, `{"file_path":"f.txt","old_string":"a","new_string":"b","replace_all":null}`, `invalid arguments: "replace_all" must be a boolean`},
		{ToolEdit, `{}`, `invalid arguments: missing required property "file_path"; missing required property "old_string"; missing required property "new_string"`},
		{ToolEdit, `{"file_path":"f.txt","old_string":1,"new_string":false,"replace_all":0}`,
			`invalid arguments: "old_string" must be a string; "new_string" must be a string; "replace_all" must be a boolean`},
	}
	for _, tc := range tests {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			h := h.in(t)
			mustFail(t, h.call(tc.tool, agent, tc.args), "", tc.want)
		})
	}
	// Nothing was created by any of them.
	mustNotExist(t, h.backing("f.txt"))
	// Properties not in the schema are allowed (no additionalProperties).
	mustOK(t, h.call(ToolWrite, agent, `{"file_path":"f.txt","content":"x","extra":1}`))
}

// Every missing required property is reported first, in `required` order,
// and only then the type violations of the properties that are present, in
// `properties` order.
func TestSchemaViolationsRequiredBeforeTypeErrors(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		tool, args, want string
	}{
		{ToolEdit, `{"old_string":1}`,
			`invalid arguments: missing required property "file_path"; missing required property "new_string"; "old_string" must be a string`},
		{ToolEdit, `{"file_path":1,"replace_all":"x"}`,
			`invalid arguments: missing required property "old_string"; missing required property "new_string"; "file_path" must be a string; "replace_all" must be a boolean`},
		{ToolWrite, `{"file_path":1}`,
			`invalid arguments: missing required property "content"; "file_path" must be a string`},
	}
	for _, tc := range tests {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			h := h.in(t)
			mustFail(t, h.call(tc.tool, agent, tc.args), "", tc.want)
		})
	}
}

// Arguments that are JSON but not an object fail the root check, whose
// diagnostic path is "arguments".
func TestSchemaNonObjectArguments(t *testing.T) {
	h := newHarness(t)
	for _, args := range []string{`[]`, `"f.txt"`, `1`, `true`} {
		t.Run(args, func(t *testing.T) {
			h := h.in(t)
			mustFail(t, h.call(ToolRead, agent, args), "", `invalid arguments: "arguments" must be an object`)
		})
	}
}

// A property present with the value null is not missing, and null is not a
// number: `"offset" must be a number`, not a tool-level range error.
func TestSchemaNullNumberIsTypeViolation(t *testing.T) {
	h := newHarness(t)
	h.put("f.txt", "x\n")
	mustFail(t, h.call(ToolRead, agent, `{"file_path":"f.txt","offset":null}`), "", `invalid arguments: "offset" must be a number`)
	mustFail(t, h.call(ToolRead, agent, `{"file_path":"f.txt","limit":null}`), "", `invalid arguments: "limit" must be a number`)
}

func TestReadNotFound(t *testing.T) {
	h := newHarness(t)
	mustFail(t, h.read(agent, "nope.txt"), versionstore.CodeNotFound, `cannot read "`+h.disp("nope.txt")+`": not found`)
	mustNotExist(t, h.backing("nope.txt"))
	// The miss was recorded as absence: an edit now says "not found" (not
	// "read it first"), without a remedy.
	mustFail(t, h.edit(agent, "nope.txt", "a", "b"), versionstore.CodeNotFound, `cannot edit "`+h.disp("nope.txt")+`": not found`)
	mustText(t, h.write(agent, "nope.txt", "now here\n"), fileBlock(h.disp("nope.txt"), "Created file"))
	if got := h.get("nope.txt"); got != "now here\n" {
		t.Fatalf("content = %q", got)
	}
}

func TestReadNotRegularFile(t *testing.T) {
	h := newHarness(t)
	if err := os.Mkdir(h.backing("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustFail(t, h.read(agent, "dir"), versionstore.CodeNotRegularFile, `cannot read "`+h.disp("dir")+`": not a regular file`)
	mustFail(t, h.read(agent, "dir/"), versionstore.CodeNotRegularFile, `cannot read "`+h.disp("dir")+`": not a regular file`)
	// The workspace root itself, by its mount-point name.
	mustFail(t, h.read(agent, h.mount), versionstore.CodeNotRegularFile, `cannot read "`+h.mount+`": not a regular file`)
	mustFail(t, h.write(agent, "dir", "x"), versionstore.CodeNotRegularFile, `cannot write "`+h.disp("dir")+`": not a regular file`)
}

func TestReadNotText(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(h.backing("bin"), []byte{0x00, 0x01, 0x02}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.backing("latin1.txt"), []byte{0x68, 0xff, 0x69}, 0o644); err != nil {
		t.Fatal(err)
	}
	mustFail(t, h.read(agent, "bin"), versionstore.CodeNotText, `cannot read "`+h.disp("bin")+`": binary file`)
	mustFail(t, h.read(agent, "latin1.txt"), versionstore.CodeNotText, `cannot read "`+h.disp("latin1.txt")+`": invalid UTF-8 text`)
	// A failed read records nothing.
	mustFail(t, h.edit(agent, "latin1.txt", "h", "H"), versionstore.CodeNotObserved,
		`edit requires reading "`+h.disp("latin1.txt")+`" first`+readNow)
}

func TestReadOffsetOutOfRange(t *testing.T) {
	h := newHarness(t)
	h.put("f.txt", "a\nb\nc\n")
	mustFail(t, h.call(ToolRead, agent, map[string]any{"file_path": "f.txt", "offset": 5}), versionstore.CodeNotFound,
		`offset 5 is out of range for "`+h.disp("f.txt")+`" (3 lines)`)
	mustFail(t, h.call(ToolRead, agent, map[string]any{"file_path": "f.txt", "offset": 4}), versionstore.CodeNotFound,
		`offset 4 is out of range for "`+h.disp("f.txt")+`" (3 lines)`)
	// Errors after the stat record nothing.
	mustFail(t, h.edit(agent, "f.txt", "a", "A"), versionstore.CodeNotObserved,
		`edit requires reading "`+h.disp("f.txt")+`" first`+readNow)
	// The last line is in range.
	mustText(t, h.call(ToolRead, agent, map[string]any{"file_path": "f.txt", "offset": 3}), fileBlock(h.disp("f.txt"),
		"3: c\n\n(End of file - total 3 lines)"))
}

// The message prints the offset the model sent, as JavaScript prints it,
// even past the internal clamp at math.MaxInt32.
func TestReadOffsetOutOfRangeQuotesHugeOffset(t *testing.T) {
	h := newHarness(t)
	h.put("f.txt", "a\nb\nc\n")
	mustFail(t, h.call(ToolRead, agent, `{"file_path":"f.txt","offset":3000000000}`), versionstore.CodeNotFound,
		`offset 3000000000 is out of range for "`+h.disp("f.txt")+`" (3 lines)`)
}

func TestWriteTexts(t *testing.T) {
	h := newHarness(t)
	mustText(t, h.write(agent, "new.txt", "line one\nline two\n"),
		"<path>"+h.disp("new.txt")+"</path>\n<type>file</type>\n<content>\nCreated file\n</content>")
	if got := h.get("new.txt"); got != "line one\nline two\n" {
		t.Fatalf("created content = %q", got)
	}
	mustText(t, h.write(agent, "new.txt", "replaced\r\n"),
		"<path>"+h.disp("new.txt")+"</path>\n<type>file</type>\n<content>\nUpdated file\n</content>")
	if got := h.get("new.txt"); got != "replaced\r\n" {
		t.Fatalf("updated content = %q (bytes must be written verbatim)", got)
	}
	// Missing parent directories are created.
	mustText(t, h.write(agent, "a/b/c.txt", "deep"), fileBlock(h.disp("a/b/c.txt"), "Created file"))
	if got := h.get("a/b/c.txt"); got != "deep" {
		t.Fatalf("nested content = %q", got)
	}
}

func TestWriteOverwriteWithoutRead(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "original")
	mustFail(t, h.write(agent, "a.txt", "clobber"), versionstore.CodeNotObserved,
		`cannot overwrite existing "`+h.disp("a.txt")+`" without reading it first — read the file, then retry`)
	if got := h.get("a.txt"); got != "original" {
		t.Fatalf("file changed to %q", got)
	}
	// After a read the overwrite goes through.
	mustOK(t, h.read(agent, "a.txt"))
	mustText(t, h.write(agent, "a.txt", "replaced"), fileBlock(h.disp("a.txt"), "Updated file"))
	if got := h.get("a.txt"); got != "replaced" {
		t.Fatalf("content = %q", got)
	}
}

func TestEditTexts(t *testing.T) {
	h := newHarness(t)
	d := h.disp("a.txt")
	h.put("a.txt", "foo foo foo\nbar\n")
	mustOK(t, h.read(agent, "a.txt"))

	mustText(t, h.edit(agent, "a.txt", "bar", "baz"), "The file "+d+" has been updated successfully.")
	mustFail(t, h.edit(agent, "a.txt", "foo", "qux"), versionstore.CodeAmbiguousEdit,
		`old_string matched 3 times in "`+d+`"; provide a more specific old_string or set replace_all to true`)
	mustFail(t, h.edit(agent, "a.txt", "nothing like it", "x"), versionstore.CodeEditNotFound,
		`old_string was not found in "`+d+`"`)
	if got := h.get("a.txt"); got != "foo foo foo\nbaz\n" {
		t.Fatalf("failed edits changed the file: %q", got)
	}
	mustText(t, h.call(ToolEdit, agent, map[string]any{"file_path": "a.txt", "old_string": "foo", "new_string": "qux", "replace_all": true}),
		"The file "+d+" has been updated. All occurrences were successfully replaced.")
	if got := h.get("a.txt"); got != "qux qux qux\nbaz\n" {
		t.Fatalf("content = %q", got)
	}
	// The replace_all text follows the argument, whatever the match count.
	mustText(t, h.call(ToolEdit, agent, map[string]any{"file_path": "a.txt", "old_string": "baz", "new_string": "end", "replace_all": true}),
		"The file "+d+" has been updated. All occurrences were successfully replaced.")
	mustText(t, h.call(ToolEdit, agent, map[string]any{"file_path": "a.txt", "old_string": "end", "new_string": "", "replace_all": false}),
		"The file "+d+" has been updated successfully.")
	if got := h.get("a.txt"); got != "qux qux qux\n\n" {
		t.Fatalf("content = %q", got)
	}
}

func TestEditArgumentErrors(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "same")
	mustOK(t, h.read(agent, "a.txt"))
	tests := []struct {
		args string
		want string
	}{
		{`{"file_path":"a.txt","old_string":"same","new_string":"same"}`, "old_string and new_string must differ"},
		{`{"file_path":"a.txt","old_string":"","new_string":"x"}`, "old_string must be a non-empty string"},
		{`{"file_path":"a.txt","old_string":"","new_string":""}`, "old_string must be a non-empty string"},
		{`{"file_path":" ","old_string":"","new_string":""}`, "file_path must be a non-empty string"},
		// Only empty is refused: whitespace is literal text.
		{`{"file_path":"a.txt","old_string":" ","new_string":" "}`, "old_string and new_string must differ"},
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			h := h.in(t)
			mustFail(t, h.call(ToolEdit, agent, tc.args), "", tc.want)
		})
	}
	if got := h.get("a.txt"); got != "same" {
		t.Fatalf("content = %q", got)
	}
	// Argument checks come before the policy: a never-read file gets them too.
	mustFail(t, h.call(ToolEdit, agent, `{"file_path":"unread.txt","old_string":"a","new_string":"a"}`), "",
		"old_string and new_string must differ")
}

func TestEditNeverRead(t *testing.T) {
	h := newHarness(t)
	h.put("settings.txt", "hello world")
	mustFail(t, h.edit(agent, "settings.txt", "world", "there"), versionstore.CodeNotObserved,
		`edit requires reading "`+h.disp("settings.txt")+`" first — read the file, then retry`)
	if got := h.get("settings.txt"); got != "hello world" {
		t.Fatalf("file changed to %q", got)
	}
	// A file that does not exist and was never read: the policy answers first.
	mustFail(t, h.edit(agent, "missing.txt", "a", "b"), versionstore.CodeNotObserved,
		`edit requires reading "`+h.disp("missing.txt")+`" first — read the file, then retry`)
}
