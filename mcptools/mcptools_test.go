package mcptools

import (
	"encoding/json"
	"testing"

	"github.com/dshfs/dshfs/toolapi"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestResultIsWhatTheModelReads(t *testing.T) {
	img := &Image{MediaType: "image/png", Data: []byte("png bytes")}
	value := map[string]any{"version": "b3:00"}
	for _, tc := range []struct {
		name       string
		o          Outcome
		structured bool
		blocks     int
		wantValue  bool
	}{
		{"text only", Outcome{Text: "<path>x</path>", Value: value}, false, 1, false},
		{"an error", Outcome{Text: "Error: nope", IsError: true}, false, 1, false},
		{"an image", Outcome{Text: "<type>image</type>", Image: img, Value: value}, false, 2, false},
		{"structured, on request", Outcome{Text: "t", Value: value}, true, 1, true},
		{"structured without a value", Outcome{Text: "t"}, true, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Result(tc.o, tc.structured)
			if len(r.Content) != tc.blocks || r.Content[0].(*mcp.TextContent).Text != tc.o.Text || r.IsError != tc.o.IsError {
				t.Fatalf("result %#v, want %d blocks, the text %q first", r, tc.blocks, tc.o.Text)
			}
			if tc.blocks == 2 {
				if b := r.Content[1].(*mcp.ImageContent); b.MIMEType != img.MediaType || string(b.Data) != string(img.Data) {
					t.Fatalf("image block %#v", b)
				}
			}
			if (r.StructuredContent != nil) != tc.wantValue {
				t.Fatalf("structuredContent %#v, want one: %v", r.StructuredContent, tc.wantValue)
			}
		})
	}
}

func TestToolCarriesTitleAndHints(t *testing.T) {
	for _, d := range toolapi.Definitions(toolapi.DefaultReadLimit) {
		mt := Tool(d)
		b, _ := json.Marshal(mt.Annotations)
		var a map[string]any
		json.Unmarshal(b, &a)
		if mt.Title != d.Title || mt.Title == "" || a["readOnlyHint"] != d.Annotations.ReadOnly ||
			a["destructiveHint"] != d.Annotations.Destructive || a["openWorldHint"] != false {
			t.Errorf("%s: title %q, annotations %s", d.Name, mt.Title, b)
		}
	}
}
