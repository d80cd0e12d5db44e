package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tetherhq/tether/client"
)

func cancelCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cancel", "cancel [flags] RUN", env, stderr)
	server := fs.String("server", "TETHER_SERVER", "http://127.0.0.1:8080", "URL of the Tether server")
	token := fs.Secret("token", "TETHER_TOKEN", "API token, sent as Authorization: Bearer")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "tether cancel: give one run id")
		fs.Usage()
		return errUsage
	}
	if err := checkServer(*server); err != nil {
		return err
	}
	c := client.New(*server, &client.Options{Token: *token})
	run, err := c.CancelRun(ctx, pos[0])
	if err != nil {
		return during("cancel the run", err)
	}
	switch {
	case run.Status.Terminal():
		fmt.Fprintf(stdout, "run %s had already ended %s\n", run.ID, run.Status)
	default:
		fmt.Fprintf(stdout, "run %s: cancel requested; it ends cancelled once its agent stops (follow it with: tether tail %s)\n", run.ID, run.ThreadID)
	}
	return nil
}
