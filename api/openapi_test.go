package api_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"froog.tech/froog/api"
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

// TestOpenAPIEveryOperation: what every request can get is on every
// operation (the per-IP limit's 429, a 500; 401 and 403 unless it needs
// no key), with the error schema; each has one tag the document defines;
// and a response object says which of its fields are always there. A
// route added without them fails here before a client meets it.
func TestOpenAPIEveryOperation(t *testing.T) {
	t.Parallel()
	type response struct {
		Ref     string `json:"$ref"`
		Content map[string]struct {
			Schema map[string]any `json:"schema"`
		} `json:"content"`
	}
	var doc struct {
		Info struct {
			License struct{ Name string } `json:"license"`
		} `json:"info"`
		Tags  []struct{ Name string } `json:"tags"`
		Paths map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Info.License.Name == "" {
		t.Error("info has no license")
	}
	var tags []string
	for _, tg := range doc.Tags {
		tags = append(tags, tg.Name)
	}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			var op struct {
				Tags      []string
				Security  *[]any `json:"security"`
				Responses map[string]response
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			where := strings.ToUpper(method) + " " + path
			if len(op.Tags) != 1 || !slices.Contains(tags, op.Tags[0]) {
				t.Errorf("%s: tags %q, want one of %q", where, op.Tags, tags)
			}
			public := op.Security != nil && len(*op.Security) == 0
			want := []string{"429", "500"}
			if !public {
				want = append(want, "401", "403")
			}
			for _, s := range want {
				if _, ok := op.Responses[s]; !ok {
					t.Errorf("%s: no %s", where, s)
				}
			}
			for s, r := range op.Responses {
				if s[0] == '4' || s[0] == '5' {
					if !slices.Contains([]string{"#/components/responses/Error", "#/components/responses/LimitReached", "#/components/responses/Unavailable"}, r.Ref) &&
						!strings.HasSuffix(r.Content["application/json"].Schema["$ref"].(string), "/Error") {
						t.Errorf("%s: %s is not the error schema", where, s)
					}
					continue
				}
				for ct, c := range r.Content {
					if c.Schema["type"] == "object" && c.Schema["properties"] != nil && c.Schema["required"] == nil {
						t.Errorf("%s: %s %s names no required field", where, s, ct)
					}
				}
			}
		}
	}
}
