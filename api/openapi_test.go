package api_test

import (
	"testing"

	"froog.tech/froog/api/contract"
)

// TestOpenAPIDocumentLoads: the document parses and is valid OpenAPI 3.1
// for kin-openapi (contract.Load validates it).
func TestOpenAPIDocumentLoads(t *testing.T) {
	t.Parallel()
	if _, err := contract.Load(); err != nil {
		t.Fatal(err)
	}
}
