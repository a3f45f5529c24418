package mcptools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dshfs/dshfs/toolapi"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
)

// FromService calls the tools in this process, as actor with cwd: the
// daemon serving a session itself.
func FromService(svc *toolapi.Service, actor *Actor, cwd string) CallFunc {
	return func(ctx context.Context, tool string, args json.RawMessage) (Outcome, error) {
		res, err := svc.Call(ctx, tool, toolapi.Request{Actor: actor.Name(""), Cwd: cwd, Arguments: args})
		if err != nil {
			return Outcome{}, err
		}
		o := Outcome{Text: res.Text, IsError: res.IsError, Value: res.Value}
		if img, ok := res.Value.(toolapi.ImageValue); ok {
			o.Image = &Image{MediaType: img.MediaType, Data: img.Data}
			img.Data = nil
			o.Value = imageFacts(img)
		}
		return o, nil
	}
}

// imageFacts is an image value without its bytes, which the image block
// carries: the image is not sent twice.
func imageFacts(v toolapi.ImageValue) map[string]any {
	return map[string]any{"path": v.Path, "media_type": v.MediaType, "width": v.Width, "height": v.Height,
		"bytes": v.Bytes, "version": v.Version}
}

// FromClient calls the tools through the daemon's socket, as actor with
// cwd.
func FromClient(client *unixsocket.Client, actor *Actor, cwd string) CallFunc {
	return func(ctx context.Context, tool string, args json.RawMessage) (Outcome, error) {
		res, err := client.Call(ctx, tool, unixsocket.ToolRequest{Actor: actor.Name(""), Cwd: cwd, Arguments: args})
		if err != nil {
			return Outcome{}, err
		}
		o := Outcome{Text: res.Text, IsError: res.IsError}
		if len(res.Value) > 0 {
			o.Value = res.Value
		}
		if tool == toolapi.ToolReadImage && !res.IsError {
			if o.Image, o.Value, err = splitImage(res.Value); err != nil {
				return Outcome{}, err
			}
		}
		return o, nil
	}
}

// splitImage takes the image out of a read_image value as the socket sends
// it (the bytes as base64 under "data").
func splitImage(value json.RawMessage) (*Image, map[string]json.RawMessage, error) {
	var img struct {
		MediaType string `json:"media_type"`
		Data      []byte `json:"data"`
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(value, &img); err != nil {
		return nil, nil, fmt.Errorf("read_image value: %w", err)
	}
	if err := json.Unmarshal(value, &fields); err != nil {
		return nil, nil, fmt.Errorf("read_image value: %w", err)
	}
	delete(fields, "data")
	return &Image{MediaType: img.MediaType, Data: img.Data}, fields, nil
}
