package unixsocket

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/content"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi-validator/strict"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	bolt "go.etcd.io/bbolt"
)

// apiCheck sends requests to a daemon and checks each request and its
// real answer against openapi.json with libopenapi-validator, recording
// which (operation, status) pairs it saw.
type apiCheck struct {
	t     *testing.T
	model *v3.Document
	// strict also refuses properties the document does not declare, so a
	// field added to a wire type without the document fails here.
	strict validator.Validator
	// loose checks write and edit results, whose values are changing shape
	// (before and after go, counts of lines come: the document allows other
	// properties there), and this document's own answer (free-form).
	loose      validator.Validator
	strictOpts *config.ValidationOptions
	schemas    schema_validation.SchemaValidator
	seen       map[string]bool // "METHOD /template CODE"
}

// strictIgnored are the free-form objects of the document: maps and
// JSON Schemas, whose members strict mode would report as undeclared.
var strictIgnored = []string{
	"$.body.ops.*",              // GET /v1/status: calls by name
	"$.body[*].input_schema.**", // GET /v1/tools: each tool's JSON Schema
	"$.body.arguments.**",       // POST /v1/tools/{name}: the tool's own arguments
}

func newAPICheck(t *testing.T) *apiCheck {
	t.Helper()
	ndjson := config.WithBodyDecoder("application/x-ndjson", content.DecoderFunc(lastLine))
	strictOpts := []config.Option{config.WithFormatAssertions(), ndjson, config.WithStrictMode(), config.WithStrictIgnorePaths(strictIgnored...)}
	c := &apiCheck{t: t, seen: map[string]bool{}, strictOpts: config.NewValidationOptions(strictOpts...)}
	var errs []error
	if c.strict, errs = validator.NewValidator(parseAPIDoc(t), strictOpts...); len(errs) > 0 {
		t.Fatalf("openapi.json: %v", errs)
	}
	if c.loose, errs = validator.NewValidator(parseAPIDoc(t), config.WithFormatAssertions(), ndjson); len(errs) > 0 {
		t.Fatalf("openapi.json: %v", errs)
	}
	m, err := parseAPIDoc(t).BuildV3Model()
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	c.model = &m.Model
	c.schemas = schema_validation.NewSchemaValidator(config.WithFormatAssertions())
	return c
}

// lastLine decodes an NDJSON body for the validator, which checks one
// value per body against the schema of one line: the last line, the
// stream's outcome, stands for the body. streamLines checks every line.
func lastLine(in *content.DecodeInput) (any, error) {
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	var v any
	return v, json.Unmarshal(lines[len(lines)-1], &v)
}

func parseAPIDoc(t *testing.T) libopenapi.Document {
	t.Helper()
	doc, err := libopenapi.NewDocument(openAPIDoc)
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

// exchange is one request and the status its answer must have.
type exchange struct {
	method, target string // target: path and query
	body           string
	chunked        bool // sent without a length (chunked)
	code           int
	// bad says the request itself does not conform to the document: the
	// validator must say so, and the daemon refuse it.
	bad    bool
	loose  bool
	header map[string]string
}

func (ex exchange) String() string { return ex.method + " " + ex.target }

// request builds ex's request; a fresh one each time, as validating reads
// the body.
func (ex exchange) request() *http.Request {
	var body io.Reader
	if ex.body != "" {
		body = strings.NewReader(ex.body)
		if ex.chunked {
			body = struct{ io.Reader }{body} // no length known: chunked
		}
	}
	req, _ := http.NewRequest(ex.method, "http://dshfs"+ex.target, body)
	if ex.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range ex.header {
		req.Header.Set(k, v)
	}
	return req
}

// do sends ex through hc, checks the exchange against the document and
// returns the answer's body.
func (c *apiCheck) do(hc *http.Client, ex exchange) []byte {
	c.t.Helper()
	resp, err := hc.Do(ex.request())
	if err != nil {
		c.t.Fatalf("%s: %v", ex, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("%s: read the answer: %v", ex, err)
	}
	if resp.StatusCode != ex.code {
		c.t.Errorf("%s: status %d (%s), want %d", ex, resp.StatusCode, bytes.TrimSpace(body), ex.code)
	}
	v := c.strict
	if ex.loose {
		v = c.loose
	}
	if ok, errs := v.ValidateHttpRequest(ex.request()); ok == ex.bad {
		c.t.Errorf("%s: request conforms to the document: %v, want %v %s", ex, ok, !ex.bad, describe(errs))
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if ok, errs := v.ValidateHttpResponse(ex.request(), resp); !ok {
		c.t.Errorf("%s: %d answer does not conform to the document: %s\n%s", ex, resp.StatusCode, describe(errs), body)
	}
	op, tmpl := c.operation(ex.request())
	if op == nil {
		c.t.Fatalf("%s: no operation in the document", ex)
	}
	c.seen[ex.method+" "+tmpl+" "+strconv.Itoa(resp.StatusCode)] = true
	if mt := resp.Header.Get("Content-Type"); mt == "application/x-ndjson" {
		c.streamLines(ex, op, resp.StatusCode, body)
	}
	return body
}

// unrouted sends a request the document has no operation for: the daemon
// answers 404 with the error body.
func (c *apiCheck) unrouted(hc *http.Client, ex exchange) {
	c.t.Helper()
	if op, _ := c.operation(ex.request()); op != nil {
		c.t.Fatalf("%s: the document has an operation for it", ex)
	}
	resp, err := hc.Do(ex.request())
	if err != nil {
		c.t.Fatalf("%s: %v", ex, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" {
		c.t.Errorf("%s: %d %s, want a 404 JSON answer", ex, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	c.checkSchema(ex.String(), c.component("Error"), body)
}

// operation finds the document's operation for req, and its path template.
func (c *apiCheck) operation(req *http.Request) (*v3.Operation, string) {
	item, errs, tmpl := paths.FindPath(req, c.model, nil)
	if item == nil || len(errs) > 0 {
		return nil, ""
	}
	return helpers.ExtractOperation(req, item), tmpl
}

// streamLines checks each line of an NDJSON answer against the schema the
// document gives for one line (OpenAPI validators read a body as one JSON
// value): progress lines, then one result or error line, last.
func (c *apiCheck) streamLines(ex exchange, op *v3.Operation, code int, body []byte) {
	c.t.Helper()
	schema := op.Responses.Codes.GetOrZero(strconv.Itoa(code)).Content.GetOrZero("application/x-ndjson").Schema.Schema()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 64<<20)
	var kinds []string
	for sc.Scan() {
		c.checkSchema(fmt.Sprintf("%s: line %d", ex, len(kinds)+1), schema, sc.Bytes())
		var line map[string]json.RawMessage
		json.Unmarshal(sc.Bytes(), &line)
		for k := range line {
			kinds = append(kinds, k)
		}
	}
	if n := len(kinds); n == 0 || kinds[n-1] == "progress" || slices.ContainsFunc(kinds[:n-1], func(k string) bool { return k != "progress" }) {
		c.t.Errorf("%s: stream lines %v, want progress lines and then one result or error", ex, kinds)
	}
}

// checkSchema validates one JSON value against schema, strictly.
func (c *apiCheck) checkSchema(what string, schema *base.Schema, b []byte) {
	c.t.Helper()
	if ok, errs := c.schemas.ValidateSchemaBytesWithVersion(schema, b, 3.1); !ok {
		c.t.Errorf("%s: does not conform to the document: %s\n%s", what, describe(errs), b)
		return
	}
	var v any
	json.Unmarshal(b, &v)
	res := strict.NewValidator(c.strictOpts, 3.1).Validate(strict.Input{Schema: schema, Data: v,
		Direction: strict.DirectionResponse, Options: c.strictOpts, BasePath: "$.body", Version: 3.1})
	for _, u := range res.UndeclaredValues {
		c.t.Errorf("%s: %s is not in the document\n%s", what, u.Path, b)
	}
}

func (c *apiCheck) component(name string) *base.Schema {
	p := c.model.Components.Schemas.GetOrZero(name)
	if p == nil {
		c.t.Fatalf("openapi.json has no schema %s", name)
	}
	return p.Schema()
}

func describe(errs []*liberrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n\t%s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n\t\t%s %s: %s", se.FieldPath, se.KeywordLocation, se.Reason)
		}
	}
	return b.String()
}

// notProduced are the documented answers this test cannot cause: they
// come from a fault inside the daemon (a handler panic, a failing index),
// not from anything a client sends.
var notProduced = map[string]string{
	"POST /v1/mcp 101":                      "the descriptors cannot pass through net/http's client: integration/mcp_test.go hands a real session over",
	"POST /v1/mcp 500":                      "a handler panic, or a connection net/http cannot hand over",
	"POST /v1/actors/{actor}/processes 500": "a handler panic",
	"GET /v1/branches 500":                  "the branches' state cannot be read",
	"POST /v1/branches 500":                 "the branch cannot be mounted",
	"DELETE /v1/branches/{name} 500":        "the branch's files cannot be removed",
	"GET /v1/branches/{name}/diff 500":      "the branch's files cannot be read",
	"POST /v1/branches/{name}/merge 500":    "the index cannot be written",
	"GET /v1/log 500":                       "the index cannot be read",
	"GET /v1/checkpoints 500":               "the index cannot be read",
	"POST /v1/checkpoints 500":              "a handler panic",
	"DELETE /v1/checkpoints/{name} 500":     "the index cannot be written",
	"POST /v1/gc 500":                       "a handler panic (a failed collection is an error line)",
	"GET /v1/history 500":                   "a handler panic",
	"GET /v1/openapi.json 500":              "a handler panic",
	"POST /v1/rewind 500":                   "a handler panic (a failed rewind is an error line)",
	"GET /v1/status 500":                    "a handler panic",
	"GET /v1/tools 500":                     "a handler panic",
	"POST /v1/tools/{name} 500":             "a tool's panic, or an answer that cannot be encoded",
}

// checkCoverage fails for a documented (operation, status) pair that was
// neither exercised nor listed in notProduced, and for a stale entry there.
func (c *apiCheck) checkCoverage() {
	c.t.Helper()
	notProduced := maps.Clone(notProduced)
	for p, item := range c.model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			for code := range op.Responses.Codes.KeysFromOldest() {
				key := strings.ToUpper(method) + " " + p + " " + code
				_, excused := notProduced[key]
				switch {
				case !c.seen[key] && !excused:
					c.t.Errorf("%s is documented but not exercised", key)
				case c.seen[key] && excused:
					c.t.Errorf("%s is exercised: drop it from notProduced", key)
				}
				delete(notProduced, key)
			}
		}
	}
	for key := range notProduced {
		c.t.Errorf("notProduced names %s, which the document does not list", key)
	}
}

// toolNamesMatch checks that the document's tool names are the tools.
func (c *apiCheck) toolNamesMatch(defs []ToolDef) {
	var names, documented []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	for _, p := range c.model.Paths.PathItems.GetOrZero("/v1/tools/{name}").Post.Parameters {
		for _, e := range p.Schema.Schema().Enum {
			documented = append(documented, e.Value)
		}
	}
	slices.Sort(names)
	slices.Sort(documented)
	if !slices.Equal(names, documented) || len(names) == 0 {
		c.t.Errorf("tools %v, openapi.json names %v", names, documented)
	}
}

// serveBare serves d's tools without a version store, on a socket of its
// own, and returns an HTTP client for it.
func serveBare(t *testing.T, d *daemon) *http.Client {
	socket := filepath.Join(t.TempDir(), "bare.sock")
	l, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- NewServer(Config{Tools: d.svc}).Serve(l) }()
	t.Cleanup(func() { l.Close(); <-done })
	return httpClient(socket)
}

// absentPrefix is 4 hex digits that begin no version in h.
func absentPrefix(h []HistoryEntry) string {
	for i := 0; ; i++ {
		p := strconv.FormatInt(int64(0x1000+i), 16)
		if !slices.ContainsFunc(h, func(e HistoryEntry) bool { return strings.HasPrefix(e.Version.String(), "b3:"+p) }) {
			return p
		}
	}
}

// corrupt damages the kept bytes of version v (a small object: in the
// index's objects bucket, keyed by the digest).
func corrupt(t *testing.T, store *versionstore.Store, v string) {
	ver, err := versionstore.ParseVersion(v)
	if err != nil {
		t.Fatal(err)
	}
	err = store.DB().Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("objects"))
		obj := bytes.Clone(b.Get(ver[:]))
		if obj == nil {
			return errors.New("not kept in the index")
		}
		obj[len(obj)-1] ^= 0xff
		return b.Put(ver[:], obj)
	})
	if err != nil {
		t.Fatalf("corrupt %s: %v", v, err)
	}
}

// writePNG writes a small image at path.
func writePNG(t *testing.T, path string) {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
