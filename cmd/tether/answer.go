package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/client"
)

func answerCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("answer", "answer [flags] RUN VALUE...", env, stderr)
	server := fs.String("server", "TETHER_SERVER", "http://127.0.0.1:8080", "URL of the Tether server")
	token := fs.Secret("token", "TETHER_TOKEN", "API token, sent as Authorization: Bearer")
	asJSON := fs.Bool("json", "TETHER_ANSWER_JSON", false, `send VALUE as JSON (like '{"tone":"dry"}') instead of as a string`)
	request := fs.String("request", "TETHER_REQUEST", "", "the request to answer (default: the one the run waits on)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		fmt.Fprintln(stderr, "tether answer: give a run id and the answer")
		fs.Usage()
		return errUsage
	}
	runID, text := pos[0], strings.Join(pos[1:], " ")
	var value any = text
	if *asJSON {
		if !json.Valid([]byte(text)) {
			return fmt.Errorf("--json: %q is not JSON", shorten(text, 60))
		}
		value = json.RawMessage(text)
	}
	if err := checkServer(*server); err != nil {
		return err
	}
	c := client.New(*server, &client.Options{Token: *token})
	reqID := *request
	if reqID == "" {
		// The request is the run's open run.waiting, which the run carries.
		snap, err := c.Run(ctx, runID)
		if err != nil {
			return during("get the run", err)
		}
		r := snap.Runs[0]
		if r.Status != tether.RunWaiting || r.Request == nil {
			return fmt.Errorf("run %s is %s, not waiting for input", runID, r.Status)
		}
		reqID = r.Request.ID
		fmt.Fprintf(stderr, "? %s\n", safeText(question(r.Request)))
	}
	if err := c.SubmitInput(ctx, runID, reqID, value); err != nil {
		return during("send the answer", err)
	}
	fmt.Fprintf(stdout, "answered request %s of run %s\n", reqID, runID)
	return nil
}
