package runs

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

var update = flag.Bool("update", false, "rewrite the snapshot of each testdata/reduce vector from the reducer")

// reduceVector is a golden vector of the reducer: a thread, its events, and
// the snapshot they fold into. The files hold only wire JSON so that the
// TypeScript reducer can run them too.
type reduceVector struct {
	Name     string            `json:"name"`
	Thread   json.RawMessage   `json:"thread"`
	Events   []json.RawMessage `json:"events"`
	Snapshot json.RawMessage   `json:"snapshot"`
}

// machineVector is a rejection vector: events[error_index] is rejected with
// code, every event before it is accepted.
type machineVector struct {
	Name       string            `json:"name"`
	Thread     json.RawMessage   `json:"thread"`
	Events     []json.RawMessage `json:"events"`
	ErrorIndex int               `json:"error_index"`
	Code       tether.Code       `json:"code"`
}

func readVector(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// decodeStrict decodes wire JSON, rejecting fields the Go types do not
// have, so that a vector cannot rely on something only one reducer reads.
func decodeStrict(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}

func vectorThread(t *testing.T, raw json.RawMessage) tether.Thread {
	th := newThread()
	if len(raw) > 0 {
		th = tether.Thread{}
		decodeStrict(t, raw, &th)
	}
	return th
}

func TestReduceVectors(t *testing.T) {
	files, err := filepath.Glob("testdata/reduce/*.json")
	if err != nil || len(files) < 8 {
		t.Fatalf("want at least 8 vectors, found %d (%v)", len(files), err)
	}
	for _, name := range files {
		t.Run(strings.TrimSuffix(filepath.Base(name), ".json"), func(t *testing.T) {
			var v reduceVector
			readVector(t, name, &v)
			s := NewState(vectorThread(t, v.Thread))
			for i, raw := range v.Events {
				var e tether.Event
				decodeStrict(t, raw, &e)
				if err := s.Apply(&e); err != nil {
					t.Fatalf("event %d (%s): %v", i, e.Type, err)
				}
			}
			checkAgrees(t, s)
			got, err := json.Marshal(s.Snapshot())
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				v.Snapshot = got
				out, err := json.MarshalIndent(v, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(name, append(out, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := diffJSON(t, got, v.Snapshot); diff != "" {
				t.Errorf("snapshot differs (got, want):\n%s", diff)
			}
		})
	}
}

func TestMachineVectors(t *testing.T) {
	files, err := filepath.Glob("testdata/machine/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("want at least 10 vectors, found %d (%v)", len(files), err)
	}
	for _, name := range files {
		t.Run(strings.TrimSuffix(filepath.Base(name), ".json"), func(t *testing.T) {
			var v machineVector
			readVector(t, name, &v)
			if v.ErrorIndex < 0 || v.ErrorIndex >= len(v.Events) || v.Code == "" {
				t.Fatalf("bad vector: error_index %d of %d events, code %q", v.ErrorIndex, len(v.Events), v.Code)
			}
			th := vectorThread(t, v.Thread)
			s := NewState(th)
			m := NewMachine(th.ID)
			tx := m.Begin()
			for i, raw := range v.Events[:v.ErrorIndex+1] {
				var e tether.Event
				decodeStrict(t, raw, &e)
				txErr := tx.Apply(&e)
				err := s.Apply(&e)
				if i < v.ErrorIndex {
					if err != nil || txErr != nil {
						t.Fatalf("event %d (%s): State %v, Tx %v", i, e.Type, err, txErr)
					}
					continue
				}
				for what, err := range map[string]error{"State": err, "Tx": txErr} {
					if tether.CodeOf(err) != v.Code {
						t.Errorf("%s: event %d (%s): %v, want code %s", what, i, e.Type, err, v.Code)
					}
				}
				t.Logf("%s: %v", e.Type, err)
			}
		})
	}
}

// diffJSON compares two JSON documents by value and describes where they
// differ, one path per line; "" means equal.
func diffJSON(t *testing.T, got, want []byte) string {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got: %v", err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want: %v", err)
	}
	if reflect.DeepEqual(g, w) {
		return ""
	}
	var lines []string
	diffValue("$", g, w, &lines)
	return strings.Join(lines, "\n")
}

func diffValue(path string, g, w any, out *[]string) {
	switch gv := g.(type) {
	case map[string]any:
		wv, ok := w.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range gv {
			keys[k] = true
		}
		for k := range wv {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			a, inG := gv[k]
			b, inW := wv[k]
			switch {
			case !inG:
				*out = append(*out, fmt.Sprintf("%s.%s: missing, want %s", path, k, compact(b)))
			case !inW:
				*out = append(*out, fmt.Sprintf("%s.%s: %s, want nothing", path, k, compact(a)))
			default:
				diffValue(path+"."+k, a, b, out)
			}
		}
		return
	case []any:
		wv, ok := w.([]any)
		if !ok || len(wv) != len(gv) {
			break
		}
		for i := range gv {
			diffValue(fmt.Sprintf("%s[%d]", path, i), gv[i], wv[i], out)
		}
		return
	}
	if !reflect.DeepEqual(g, w) {
		*out = append(*out, fmt.Sprintf("%s: %s, want %s", path, compact(g), compact(w)))
	}
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
