package unixsocket

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPIDoc is the API as an OpenAPI 3.1 document. It is kept by hand
// beside the route table; openapi_test.go checks every route's real
// answers against it, and that it names the same routes as NewServer.
//
//go:embed openapi.json
var openAPIDoc []byte

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(openAPIDoc)))
	w.Write(openAPIDoc)
}
