package tether

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// JSONError turns an encoding/json decoding error into a short message fit
// for a client: what is wrong and where, without Go type names.
func JSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "body ends before the JSON value is complete"
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return fmt.Sprintf("expected %s, got %s", jsonKind(typ.Type.Kind().String()), typ.Value)
		}
		return fmt.Sprintf("field %q must be %s, got %s", field, jsonKind(typ.Type.Kind().String()), typ.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + f
	}
	if strings.HasPrefix(msg, "json: ") || strings.HasPrefix(msg, "tether.") {
		return "invalid JSON value"
	}
	return "invalid JSON: " + strings.TrimPrefix(msg, "json: ")
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number"
	}
	return "another type"
}
