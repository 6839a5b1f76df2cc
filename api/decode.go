package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxBody is the largest request body the API reads.
const maxBody = 1 << 20

// readBodyMax reads a request body of at most limit bytes.
func readBodyMax(r *http.Request, limit int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		return nil, badRequest("invalid_body", "reading the request body failed")
	}
	if len(b) > limit {
		return nil, badRequest("request_too_large", "the request body is over %d MiB", limit>>20)
	}
	return b, nil
}

// readJSON reads a body of at most limit bytes and decodes it into v (see
// decodeJSON).
func readJSON(r *http.Request, limit int, v any, emptyOK bool) error {
	b, err := readBodyMax(r, limit)
	if err != nil {
		return err
	}
	return decodeJSON(b, v, emptyOK)
}

// decodeJSON decodes a JSON object into v strictly: no unknown fields, no
// trailing data, the right types. An empty body is an empty object when
// emptyOK.
func decodeJSON(b []byte, v any, emptyOK bool) error {
	if len(bytes.TrimSpace(b)) == 0 {
		if emptyOK {
			return nil
		}
		return badRequest("invalid_json", "the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return badRequest("invalid_json", "the request body holds more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("invalid_json", "the request body holds more than one JSON value")
	}
	return nil
}

func jsonError(err error) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return badRequest("invalid_json", "the request body is not valid JSON (at byte %d)", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("invalid_json", "the request body must be a JSON object")
		}
		return badRequest("invalid_type", "%s must be %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest("invalid_json", "the request body is not valid JSON (it ends early)")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown_field", "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return badRequest("invalid_json", "the request body is not valid JSON")
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "int32", "float64":
		return "a number"
	case "string", "ptr":
		return "a string"
	case "bool":
		return "true or false"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	}
	return fmt.Sprintf("of kind %s", k)
}
