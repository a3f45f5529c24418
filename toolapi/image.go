package toolapi

import (
	"bytes"
	"context"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/image/webp"
)

// The reference implementation's image limits (its local attachment store's
// defaults).
const (
	// DefaultMaxImageBytes is min(maxImageBytes 3.5 MiB, maxMessageImageBytes 100 MiB).
	DefaultMaxImageBytes     = 3.5 * 1024 * 1024
	DefaultMaxImageDimension = 2000
	DefaultMaxImagePixels    = 40_000_000
)

// Image media types, in the order the reference implementation lists them.
const (
	MediaPNG  = "image/png"
	MediaJPEG = "image/jpeg"
	MediaWebP = "image/webp"
	MediaGIF  = "image/gif"
)

// imageFormats maps a lowercased extension to its media type.
var imageFormats = map[string]string{
	".png": MediaPNG, ".jpg": MediaJPEG, ".jpeg": MediaJPEG, ".webp": MediaWebP, ".gif": MediaGIF,
}

var readImageProps = []property{
	{"file_path", "string", "Path to the image file, resolved by the filesystem backend.", true},
}

// ImageValue is the structured outcome of read_image. Data is the image's
// bytes (base64 in JSON).
type ImageValue struct {
	Path      string               `json:"path"`
	MediaType string               `json:"media_type"`
	Width     int                  `json:"width"`
	Height    int                  `json:"height"`
	Bytes     int                  `json:"bytes"`
	Version   versionstore.Version `json:"version"`
	Data      []byte               `json:"data"`
}

// readImage is the reference implementation's read_image: gates on the argument
// and the extension before any I/O, then a bounded read, a check that the bytes
// are the declared format with a header within the size limits, and a full
// decode, so that a model is never sent an image it cannot use. Whether the
// model accepts images at all is the harness's gate: it knows the model.
func (s *Service) readImage(ctx context.Context, req Request) Result {
	a, err := decodeArgs(req.Arguments, readImageProps)
	if err != nil {
		return failure("read", err)
	}
	p, err := a.filePath()
	if err != nil {
		return failure("read", err)
	}
	ext := strings.ToLower(filepath.Ext(p))
	mediaType, ok := imageFormats[ext]
	if !ok {
		return failure("read", argError(`cannot read "`+p+`": read_image only accepts PNG/JPEG/WebP/GIF paths`))
	}
	if !slices.Contains(s.cfg.ImageMediaTypes, mediaType) {
		return failure("read", argError(`cannot read "`+p+`": `+mediaType+" images are not accepted by this deployment"))
	}
	t, err := s.resolve(req.Cwd, p, "read")
	if err != nil {
		return failure("read", err)
	}
	data, v, err := s.store.ReadBytes(ctx, t, s.cfg.MaxImageBytes)
	if versionstore.CodeOf(err) == versionstore.CodeNotFound {
		if oerr := s.observe(req.Actor, t, "read", policy.Absent); oerr != nil {
			return failure("read", oerr)
		}
	}
	if err != nil {
		return failure("read", err)
	}
	w, h, err := s.checkImage(t.Display, ext, mediaType, data)
	if err != nil {
		return failure("read", err)
	}
	if err := s.observe(req.Actor, t, "read", policy.Present(v)); err != nil {
		return failure("read", err)
	}
	return Result{
		Text: "<path>" + t.Display + "</path>\n<type>image</type>\n<content>\n" + mediaType + " image, " +
			itoa(w) + "x" + itoa(h) + " px, " + itoa(len(data)) + " bytes\n</content>",
		Value: ImageValue{Path: t.Display, MediaType: mediaType, Width: w, Height: h, Bytes: len(data), Version: v, Data: data},
	}
}

// checkImage returns the dimensions of data, which its extension says is
// mediaType: the format is sniffed from the magic bytes, the limits are
// checked on the header alone, and then the whole image is decoded.
func (s *Service) checkImage(display, ext, mediaType string, data []byte) (w, h int, err error) {
	if sniffImage(data) != mediaType {
		return 0, 0, argError(`cannot read "` + display + `": the ` + ext + " extension declares " + mediaType +
			", but the bytes use a different image format; rename the file to match its actual format if it is PNG/JPEG/WebP/GIF, or convert it to one of those formats")
	}
	dec := imageDecoders[mediaType]
	cfg, err := dec.config(bytes.NewReader(data))
	if err != nil {
		return 0, 0, corruptImage(display, mediaType, err)
	}
	if cfg.Width > s.cfg.MaxImageDimension || cfg.Height > s.cfg.MaxImageDimension {
		return 0, 0, argError(`cannot read "` + display + `": at least one image side exceeds the ` +
			itoa(s.cfg.MaxImageDimension) + "px limit; downscale the image and read the smaller copy")
	}
	if int64(cfg.Width)*int64(cfg.Height) > int64(s.cfg.MaxImagePixels) {
		return 0, 0, argError(`cannot read "` + display + `": the image exceeds the ` +
			itoa(s.cfg.MaxImagePixels) + "-pixel decoded-size limit; downscale the image and read the smaller copy")
	}
	if cfg.Width == 0 || cfg.Height == 0 {
		return 0, 0, corruptImage(display, mediaType, errEmptyImage)
	}
	// Bounded by the limits just checked: at most MaxImagePixels pixels.
	if _, err := dec.decode(bytes.NewReader(data)); err != nil {
		return 0, 0, corruptImage(display, mediaType, err)
	}
	return cfg.Width, cfg.Height, nil
}

var errEmptyImage = argError("it has no pixels")

// corruptImage is dshfs's message for bytes that start as the declared format
// but do not decode; the reference implementation has none (its store rejects
// them with the decoder's own text).
func corruptImage(display, mediaType string, err error) error {
	return argError(`cannot read "` + display + `": the ` + mediaType + " data is corrupt or truncated (" + err.Error() +
		"); re-create the image or read another copy")
}

type imageDecoder struct {
	config func(io.Reader) (image.Config, error)
	decode func(io.Reader) (image.Image, error)
}

// imageDecoders are called directly, not through image.RegisterFormat, so
// that the declared format, not a sniff of the bytes, picks the decoder.
var imageDecoders = map[string]imageDecoder{
	MediaPNG:  {png.DecodeConfig, png.Decode},
	MediaJPEG: {jpeg.DecodeConfig, jpeg.Decode},
	MediaGIF:  {gif.DecodeConfig, gif.Decode},
	MediaWebP: {webp.DecodeConfig, webp.Decode},
}

// sniffImage names the image format of data's magic bytes, or "".
func sniffImage(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return MediaPNG
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return MediaJPEG
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return MediaGIF
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return MediaWebP
	}
	return ""
}

// parseMediaTypes checks a deployment's list of accepted media types.
func parseMediaTypes(types []string) ([]string, error) {
	if types == nil {
		return []string{MediaPNG, MediaJPEG, MediaWebP, MediaGIF}, nil
	}
	for _, t := range types {
		if _, ok := imageDecoders[t]; !ok {
			return nil, argError("tool-fs: unknown image media type " + strconv.Quote(t))
		}
	}
	return types, nil
}
