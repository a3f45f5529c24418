package toolapi

import (
	"encoding/json"
	"strconv"
)

// ToolDef is one model-facing tool: name, description and JSON Schema of its
// arguments, byte-identical to the reference implementation's.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// Title and Annotations are for the harness, not the model: a display
	// name, and MCP's hints of what a call does, as the MCP reference
	// filesystem server gives its tools.
	Title       string      `json:"title"`
	Annotations Annotations `json:"annotations"`
}

// Annotations are MCP's tool hints. Every tool acts on the workspace only
// (openWorldHint false).
type Annotations struct {
	ReadOnly    bool `json:"readOnlyHint"`
	Destructive bool `json:"destructiveHint"`
	Idempotent  bool `json:"idempotentHint"`
	OpenWorld   bool `json:"openWorldHint"`
}

var (
	readOnly = Annotations{ReadOnly: true}
	// A guarded write replaces the file; writing the same content again
	// changes nothing more. An edit applied twice would edit twice.
	replaces = Annotations{Destructive: true, Idempotent: true}
	edits    = Annotations{Destructive: true}
)

// Tool names.
const (
	ToolRead      = "read"
	ToolReadImage = "read_image"
	ToolWrite     = "write"
	ToolEdit      = "edit"
)

// property is one argument in schema order; the order is also the order in
// which argument violations are reported.
type property struct {
	name, typ, description string
	required               bool
}

var (
	writeProps = []property{
		{"file_path", "string", "Path to write, resolved by the filesystem backend.", true},
		{"content", "string", "Full UTF-8 text content to write.", true},
	}
	editProps = []property{
		{"file_path", "string", "Path to edit, resolved by the filesystem backend.", true},
		{"old_string", "string", "Literal text to replace. Must match exactly.", true},
		{"new_string", "string", "Literal replacement text. Use an empty string to delete the match.", true},
		{"replace_all", "boolean", "Replace all matches. Defaults to false; when false, old_string must appear exactly once.", false},
	}
)

func readProps(readLimit int) []property {
	return []property{
		{"file_path", "string", "Path to read, resolved by the filesystem backend.", true},
		{"offset", "number", "1-based first line to return. Defaults to 1.", false},
		{"limit", "number", "Maximum number of lines to return. Defaults to " + strconv.Itoa(readLimit) + ".", false},
	}
}

// schemaJSON renders props as the reference implementation's parameter schema:
// an object with the properties in order and the required list, and no
// additionalProperties.
func schemaJSON(props []property) json.RawMessage {
	b := []byte(`{"type":"object","properties":{`)
	required := []string{} // [] rather than null for a tool without arguments
	for i, p := range props {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, p.name)
		b = append(b, `:{"type":`...)
		b = strconv.AppendQuote(b, p.typ)
		b = append(b, `,"description":`...)
		desc, _ := json.Marshal(p.description)
		b = append(b, desc...)
		b = append(b, '}')
		if p.required {
			required = append(required, p.name)
		}
	}
	b = append(b, `},"required":`...)
	req, _ := json.Marshal(required)
	b = append(b, req...)
	return append(b, '}')
}

// Definitions returns the tool definitions for a read limit (the default is
// DefaultReadLimit), for callers that list tools without a Service: those
// of a mount with the read-before-write policy.
func Definitions(readLimit int) []ToolDef {
	return toolDefs(readLimit, true, "the session's working directory (by default the mount point)")
}

// The reference implementation's descriptions (its tool-fs package) come first,
// byte for byte; what dshfs adds follows them: what a relative file_path is
// relative to, what the policy asks before a write or an edit, and where images
// are read.
const (
	imagesElsewhere = " For a PNG/JPEG/WebP/GIF image use read_image: read refuses it as a binary file."
	writeNeedsRead  = " To replace an existing file, read it first in this session (unless this session just wrote or edited it); a new file needs no read."
	editNeedsRead   = " Read the file first in this session, unless this session just wrote or edited it."
)

// toolDefs are the tools whose relative paths resolve against base, with
// the read-before-write policy (observing) or without.
func toolDefs(readLimit int, observing bool, base string) []ToolDef {
	relative := " A relative file_path is relative to " + base + "."
	writeNeeds, editNeeds := "", ""
	if observing {
		writeNeeds, editNeeds = writeNeedsRead, editNeedsRead
	}
	return []ToolDef{
		{ToolRead, "Read a UTF-8 text file and return line-numbered content." + relative + imagesElsewhere,
			schemaJSON(readProps(readLimit)), "Read File", readOnly},
		{ToolReadImage, "Read a PNG/JPEG/WebP/GIF file and return the image itself. Requires the current model to accept image input." + relative,
			schemaJSON(readImageProps), "Read Image", readOnly},
		{ToolWrite, "Create or fully replace a UTF-8 text file." + relative + writeNeeds, schemaJSON(writeProps), "Write File", replaces},
		{ToolEdit, "Edit an existing UTF-8 text file by replacing literal text." + relative + editNeeds, schemaJSON(editProps), "Edit File", edits},
	}
}
