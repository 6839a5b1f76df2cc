package api

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the contract: every route, status, header and field the
// API answers with (the tests check every response against it, package
// api/contract).
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns a copy of the OpenAPI document this API serves at
// GET /v1/openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDoc)
	return nil
}
