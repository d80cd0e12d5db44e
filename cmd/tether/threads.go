package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/client"
)

func threadsCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("threads", "threads [flags]", env, stderr)
	server := fs.String("server", "TETHER_SERVER", "http://127.0.0.1:8080", "URL of the Tether server")
	token := fs.Secret("token", "TETHER_TOKEN", "API token, sent as Authorization: Bearer")
	status := fs.String("status", "TETHER_STATUS", "", "only threads with this status: idle, busy, waiting or error")
	limit := fs.Int("limit", "TETHER_LIMIT", 20, "most threads to list, most recently updated first (1 to 1000)")
	jsonOut := fs.Bool("json", "TETHER_JSON", false, "print each thread as one JSON line instead of a table")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tether threads: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	if *limit < 1 || *limit > 1000 {
		return fmt.Errorf("--limit must be 1 to 1000")
	}
	if err := checkServer(*server); err != nil {
		return err
	}
	c := client.New(*server, &client.Options{Token: *token})
	threads, next, err := c.Threads(ctx, client.ThreadQuery{Status: tether.ThreadStatus(*status), Limit: *limit})
	if err != nil {
		return during("list threads", err)
	}
	if *jsonOut {
		for _, t := range threads {
			b, err := json.Marshal(t)
			if err != nil {
				return fmt.Errorf("encode: %w", err)
			}
			if _, err := stdout.Write(append(b, '\n')); err != nil {
				return err
			}
		}
		return nil
	}
	if len(threads) == 0 {
		fmt.Fprintln(stderr, "No threads. Start one with: tether run \"your question\"")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tSTATUS\tUPDATED\tACTIVE RUN\tTITLE")
	for _, t := range threads {
		run := t.ActiveRunID
		if run == "" {
			run = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Status, ago(t.UpdatedAt.Time, now), run, threadTitle(t))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(stderr, "More threads than --limit %d: raise it, or narrow with --status.\n", *limit)
	}
	return nil
}

// threadTitle is metadata.title, on one line and short.
func threadTitle(t tether.Thread) string {
	var m struct {
		Title string `json:"title"`
	}
	if json.Unmarshal(t.Metadata, &m) != nil {
		return ""
	}
	return shorten(safeLine(strings.Join(strings.Fields(m.Title), " ")), 60)
}

// ago is "12s ago", "5m ago", "3h ago", or a date.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.UTC().Format("2006-01-02")
}
