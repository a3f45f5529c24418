package toolapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// Images made in the tests, each w×h.

func pngImage(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegImage(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gifImage(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewPaletted(image.Rect(0, 0, w, h), palette.Plan9)
	img.SetColorIndex(0, 0, 3)
	var b bytes.Buffer
	if err := gif.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webpImage writes a lossless WebP (VP8L) of one colour. The standard
// library has no WebP encoder; a one-colour image needs none of the
// format's compression: each of its five prefix codes has one symbol, so
// every pixel takes zero bits.
func webpImage(t *testing.T, w, h int, c color.NRGBA) []byte {
	t.Helper()
	var bw bitWriter
	bw.bits(0x2f, 8) // VP8L signature
	bw.bits(uint32(w-1), 14)
	bw.bits(uint32(h-1), 14)
	bw.bits(1, 1)                                        // alpha is used
	bw.bits(0, 3)                                        // version
	bw.bits(0, 1)                                        // no transform
	bw.bits(0, 1)                                        // no colour cache
	bw.bits(0, 1)                                        // no meta prefix codes
	for _, sym := range []uint8{c.G, c.R, c.B, c.A, 0} { // green, red, blue, alpha, distance
		bw.bits(1, 1) // simple code
		bw.bits(0, 1) // one symbol
		bw.bits(1, 1) // of 8 bits
		bw.bits(uint32(sym), 8)
	}
	payload := bw.bytes()
	var b bytes.Buffer
	size := 4 + 8 + len(payload) + len(payload)%2
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(size))
	b.WriteString("WEBPVP8L")
	binary.Write(&b, binary.LittleEndian, uint32(len(payload)))
	b.Write(payload)
	if len(payload)%2 == 1 {
		b.WriteByte(0)
	}
	return b.Bytes()
}

// bitWriter packs bits least significant first, as VP8L reads them.
type bitWriter struct {
	buf  []byte
	nbit uint
}

func (w *bitWriter) bits(v uint32, n uint) {
	for i := uint(0); i < n; i++ {
		if w.nbit%8 == 0 {
			w.buf = append(w.buf, 0)
		}
		w.buf[len(w.buf)-1] |= byte(v>>i&1) << (w.nbit % 8)
		w.nbit++
	}
}

func (w *bitWriter) bytes() []byte { return w.buf }

func imageText(display, mediaType string, w, h, n int) string {
	return "<path>" + display + "</path>\n<type>image</type>\n<content>\n" + mediaType + " image, " +
		itoa(w) + "x" + itoa(h) + " px, " + itoa(n) + " bytes\n</content>"
}

func TestReadImageFormats(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name, mediaType string
		data            []byte
		w, ht           int
	}{
		{"a.png", MediaPNG, pngImage(t, 30, 20), 30, 20},
		{"b.jpg", MediaJPEG, jpegImage(t, 17, 9), 17, 9},
		{"c.JPEG", MediaJPEG, jpegImage(t, 8, 8), 8, 8},
		{"d.gif", MediaGIF, gifImage(t, 5, 40), 5, 40},
		{"e.webp", MediaWebP, webpImage(t, 64, 3, color.NRGBA{R: 200, G: 10, B: 30, A: 255}), 64, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.put(c.name, string(c.data))
			r := h.call(ToolReadImage, agent, map[string]any{"file_path": c.name})
			mustText(t, r, imageText(h.disp(c.name), c.mediaType, c.w, c.ht, len(c.data)))
			v, ok := r.Value.(ImageValue)
			if !ok {
				t.Fatalf("value is %T", r.Value)
			}
			want := versionstore.Sum(c.data)
			if v.Path != h.disp(c.name) || v.MediaType != c.mediaType || v.Width != c.w || v.Height != c.ht ||
				v.Bytes != len(c.data) || v.Version != want || !bytes.Equal(v.Data, c.data) {
				t.Fatalf("value %+v", v)
			}
			// On the wire the bytes are base64, under "data".
			b, _ := json.Marshal(r.Value)
			var wire struct{ Data []byte }
			if err := json.Unmarshal(b, &wire); err != nil || !bytes.Equal(wire.Data, c.data) {
				t.Fatalf("wire value does not carry the bytes: %v", err)
			}
			// The read is an observation at the file's version: the actor
			// may now overwrite it; another actor, who saw nothing, may not.
			mustFail(t, h.write("other", c.name, "x"), versionstore.CodeNotObserved,
				`cannot overwrite existing "`+h.disp(c.name)+`" without reading it first`+readNow)
			mustOK(t, h.write(agent, c.name, "replaced"))
		})
	}
}

func TestReadImageRefusals(t *testing.T) {
	h := newHarness(t, withConfig(Config{MaxImageBytes: 4096, MaxImagePixels: 1000}))
	png30 := pngImage(t, 30, 20)
	h.put("photo.jpg", string(png30))
	h.put("huge.png", string(bytes.Repeat([]byte{0x89}, 5000)))
	h.put("wide.gif", string(gifImage(t, 2001, 1)))
	h.put("many.png", string(pngImage(t, 40, 30))) // 1200 pixels
	h.put("trunc.png", string(png30[:len(png30)/2]))
	h.put("header.png", "\x89PNG\r\n\x1a\ngarbage")
	h.put("dir.png/x", "")
	h.put("text.png", "just text")
	d := h.disp

	cases := []struct {
		path string
		code versionstore.Code
		msg  string
	}{
		{"", "", "file_path must be a non-empty string"},
		{"notes.txt", "", `cannot read "notes.txt": read_image only accepts PNG/JPEG/WebP/GIF paths`},
		{"missing.bmp", "", `cannot read "missing.bmp": read_image only accepts PNG/JPEG/WebP/GIF paths`},
		{"missing.png", versionstore.CodeNotFound, `cannot read "` + d("missing.png") + `": not found`},
		{"dir.png", versionstore.CodeNotRegularFile, `cannot read "` + d("dir.png") + `": not a regular file`},
		{"huge.png", versionstore.CodeTooLarge, `cannot read "` + d("huge.png") + `": 5000 bytes exceeds the 4096-byte limit`},
		{"photo.jpg", "", `cannot read "` + d("photo.jpg") + `": the .jpg extension declares image/jpeg, but the bytes use a different image format; rename the file to match its actual format if it is PNG/JPEG/WebP/GIF, or convert it to one of those formats`},
		{"text.png", "", `cannot read "` + d("text.png") + `": the .png extension declares image/png, but the bytes use a different image format; rename the file to match its actual format if it is PNG/JPEG/WebP/GIF, or convert it to one of those formats`},
		{"wide.gif", "", `cannot read "` + d("wide.gif") + `": at least one image side exceeds the 2000px limit; downscale the image and read the smaller copy`},
		{"many.png", "", `cannot read "` + d("many.png") + `": the image exceeds the 1000-pixel decoded-size limit; downscale the image and read the smaller copy`},
	}
	for _, c := range cases {
		mustFail(t, h.call(ToolReadImage, agent, map[string]any{"file_path": c.path}), c.code, c.msg)
	}
	// A missing image is observed absent, like a missing file read.
	if o, ok, err := h.pol.Lookup(agent, "missing.png"); err != nil || !ok || o.Present {
		t.Errorf("observation of missing.png: %+v %v %v, want absent", o, ok, err)
	}
	if _, ok, _ := h.pol.Lookup(agent, "huge.png"); ok {
		t.Error("a refused image was recorded as observed")
	}
	// Truncated and corrupt images: a clear message, no panic.
	for _, name := range []string{"trunc.png", "header.png"} {
		r := h.call(ToolReadImage, agent, map[string]any{"file_path": name})
		prefix := `cannot read "` + d(name) + `": the image/png data is corrupt or truncated (`
		if !r.IsError || !strings.HasPrefix(r.Error.Message, prefix) {
			t.Errorf("%s: %q, want a message starting %q", name, r.Text, prefix)
		}
	}
	// read itself still refuses images as binary.
	h.put("ok.png", string(png30))
	mustFail(t, h.read(agent, "ok.png"), versionstore.CodeNotText, `cannot read "`+d("ok.png")+`": binary file`)
}

func TestReadImageMediaTypes(t *testing.T) {
	h := newHarness(t, withConfig(Config{ImageMediaTypes: []string{MediaPNG}}))
	h.put("a.gif", string(gifImage(t, 2, 2)))
	mustFail(t, h.call(ToolReadImage, agent, map[string]any{"file_path": "a.gif"}), "",
		`cannot read "a.gif": image/gif images are not accepted by this deployment`)
	h.put("a.png", string(pngImage(t, 2, 2)))
	mustOK(t, h.call(ToolReadImage, agent, map[string]any{"file_path": "a.png"}))
	if _, err := New(h.store, nil, Config{MountPoint: h.mount, ImageMediaTypes: []string{"image/bmp"}}); err == nil {
		t.Fatal("an unknown media type was accepted")
	}
}

func TestReadImageSchema(t *testing.T) {
	var def ToolDef
	for _, d := range Definitions(DefaultReadLimit) {
		if d.Name == ToolReadImage {
			def = d
		}
	}
	if !strings.HasPrefix(def.Description, descReadImage) {
		t.Fatalf("description %q", def.Description)
	}
	want := `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to the image file, resolved by the filesystem backend."}},"required":["file_path"]}`
	if string(def.InputSchema) != want {
		t.Fatalf("schema:\n got %s\nwant %s", def.InputSchema, want)
	}
}
