package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// README's five-minute tour, run as written against the real binary: every
// curl and bin/tether command of its code blocks, with this server's
// address for localhost:8080 and, for the ids the tour tells the reader to
// paste (<run>, <token>, the LAST offset), real ones. Each must exit 0 (a
// stream or a tail: still running after a few seconds) and print no error
// body: a renamed route, flag or field breaks the tour here first.
func TestReadmeTour(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the tour's commands need curl")
	}
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(b), "## A five-minute tour")
	tour, _, ok2 := strings.Cut(tour, "## Configuration")
	if !ok || !ok2 {
		t.Fatal("README.md has no five-minute tour section")
	}
	s := start(t, "")
	var claim struct {
		Run   tether.Run `json:"run"`
		Lease struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	ran, vars := 0, "" // vars: the shell variables the tour set (LAST=…), for the commands after
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(tour, -1) {
		for _, cmd := range shellCommands(block[1]) {
			if !strings.HasPrefix(cmd, "curl ") && !strings.HasPrefix(cmd, "bin/tether ") && !strings.HasPrefix(cmd, "LAST=") {
				continue // pip install, the server itself
			}
			line := strings.ReplaceAll(cmd, "localhost:8080", s.addr)
			line = strings.Replace(line, "bin/tether ", bin+" ", 1)
			switch {
			case strings.HasPrefix(cmd, "LAST="):
				// The id: of an event the reader saw on the tour's thread.
				line = regexp.MustCompile(`^LAST=\S+`).ReplaceAllString(line, "LAST="+string(tourOffset(t, s)))
			case strings.Contains(cmd, "<token>"):
				line = strings.NewReplacer("<run>", claim.Run.ID, "<token>", claim.Lease.Token).Replace(line)
			case strings.Contains(cmd, "<run>"):
				// A run waiting for input, as the tour's ask run is.
				_, rid := s.demoRun(t, "a question", `{"demo":{"ask":true,"tokens":5,"delay_ms":1}}`)
				eventually(t, 20*time.Second, "the run to wait for input", func() bool {
					r, _ := s.getRun(t, rid)
					return r.Status == tether.RunWaiting
				})
				r, _ := s.getRun(t, rid)
				line = strings.NewReplacer("<run.request.id>", r.Request.ID, "<run>", rid).Replace(line)
			case strings.Contains(cmd, "/v1/workers/claim"):
				// The README's way to have the run to claim: declare the
				// agent, start a run of it.
				s.mustCall(http.MethodPut, "/v1/agents/mine", nil, http.StatusCreated, nil)
				s.createRun(t, s.createThread(t), "mine", "hello", "")
			}
			if strings.HasPrefix(cmd, "LAST=") {
				vars += strings.Fields(line)[0] + "; "
				continue
			}
			if strings.Contains(line, "<") {
				t.Fatalf("README.md: a placeholder left in %q", line)
			}
			follows := strings.Contains(cmd, "curl -N") || strings.Contains(cmd, "bin/tether tail")
			out := runTourLine(t, s, vars+line, follows)
			if strings.Contains(cmd, "/v1/workers/claim") {
				if err := json.Unmarshal([]byte(out), &claim); err != nil || claim.Lease.Token == "" {
					t.Fatalf("%s: %v: %s", cmd, err, out)
				}
			}
			ran++
		}
	}
	if ran < 15 {
		t.Fatalf("ran only %d commands of the tour", ran)
	}
}

// shellCommands splits a sh block into its commands: a line ending in a
// backslash, or inside a quote, goes on on the next line.
func shellCommands(block string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(block, "\n") {
		cur.WriteString(line)
		text := cur.String()
		if strings.HasSuffix(line, `\`) || strings.Count(text, "'")%2 == 1 {
			cur.WriteString("\n")
			continue
		}
		if strings.TrimSpace(text) != "" && !strings.HasPrefix(strings.TrimSpace(text), "#") {
			out = append(out, strings.TrimSpace(text))
		}
		cur.Reset()
	}
	return out
}

// tourOffset is the offset of an event of the tour's thread, once it has a
// few.
func tourOffset(t *testing.T, s *server) tether.Offset {
	t.Helper()
	var page struct {
		Events []tether.Event `json:"events"`
	}
	eventually(t, 20*time.Second, "events on the tour's thread", func() bool {
		s.mustCall(http.MethodGet, "/v1/threads/tour/events?after=-1", nil, http.StatusOK, &page, "Accept", "application/json")
		return len(page.Events) >= 3
	})
	return page.Events[2].Offset
}

// runTourLine runs one command of the tour with bash and returns what it
// printed; one that follows a stream is stopped after a few seconds.
func runTourLine(t *testing.T, s *server, line string, follows bool) string {
	t.Helper()
	limit := 60 * time.Second
	if follows {
		limit = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", line)
	c.Env = append(cleanEnv(), "TETHER_SERVER="+s.URL)
	c.WaitDelay = time.Second
	out, err := c.CombinedOutput()
	switch {
	case follows && ctx.Err() != nil:
		if len(out) == 0 {
			t.Errorf("%s: printed nothing in %v", line, limit)
		}
	case err != nil:
		t.Errorf("%s: %v\n%s", line, err, out)
	}
	if strings.Contains(string(out), `"error":{`) {
		t.Errorf("%s: an error:\n%s", line, out)
	}
	return string(out)
}
