// Command worker-go is an external Tether worker: it claims runs of one
// agent from a Tether server over HTTP and answers each with a fake agent
// that streams a reasoning line, a tool call and an answer, word by word.
// A prompt that contains "ask" makes the agent ask a question first (the
// run waits until a client answers).
//
// The agent is an ordinary agents.Agent; client.Worker does the rest:
// claims, heartbeats, idempotent retries while the server is away, input
// and cancel requests, finishing the run. See README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker-go:", err)
		os.Exit(1)
	}
}

func run() error {
	server := flag.String("server", envOr("TETHER_SERVER", "http://127.0.0.1:8080"), "URL of the Tether server ($TETHER_SERVER)")
	// Not the env's value as the default: -h would print the secret.
	token := flag.String("token", "", "API token with the worker role (default $TETHER_TOKEN)")
	agent := flag.String("agent", "echo", "agent name to claim runs for")
	delay := flag.Duration("delay", 50*time.Millisecond, "pause before each streamed word")
	id := flag.String("id", "", `worker ID (default "<hostname>-<pid>")`)
	concurrency := flag.Int("concurrency", 4, "runs at once")
	flag.Parse()
	if *token == "" {
		*token = os.Getenv("TETHER_TOKEN")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c := client.New(*server, &client.Options{Token: *token, Logger: log})
	w, err := c.NewWorker(client.WorkerOptions{
		ID:          *id,
		Agents:      map[string]agents.Agent{*agent: &echo{delay: *delay}},
		Concurrency: *concurrency,
		Logger:      log,
	})
	if err != nil {
		return err
	}
	log.Info("worker started", "id", w.ID(), "agent", *agent, "server", *server)
	err = w.Run(ctx)
	log.Info("worker stopped")
	return err
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// filler follows the echo of the prompt in every answer.
const filler = "This answer comes from an external worker. It claimed the run over HTTP, holds a lease that it renews with every append and with heartbeats, and streams each word as its own event. Every event is committed to the thread's durable log before any client sees it, so a client that drops, refreshes or comes late resumes from its last offset and misses nothing. If the server restarts in the middle, the worker retries its appends with the same producer sequence number until the server is back, and each event lands exactly once."

// echo is the fake agent.
type echo struct{ delay time.Duration }

// Run streams one assistant message. It returns nil when done and lets
// the worker finish the run; an error from Emit (the run was cancelled,
// the lease lost) ends it early.
func (e *echo) Run(ctx context.Context, s *agents.Session) error {
	prompt := strings.TrimSpace(s.Prompt())
	answer := "You said: " + strings.TrimRight(prompt, ".!?") + ". "
	msg, err := s.StartMessage(ctx, tether.RoleAssistant)
	if err != nil {
		return err
	}
	if err := s.Reasoning(ctx, msg, fmt.Sprintf("The user wrote %d characters; I will look them up, then echo them.", len(prompt))); err != nil {
		return err
	}

	call := msg + "-lookup"
	input, _ := json.Marshal(map[string]string{"query": prompt})
	if err := s.ToolStarted(ctx, msg, call, "lookup"); err != nil {
		return err
	}
	if err := s.ToolDelta(ctx, msg, call, string(input)); err != nil {
		return err
	}
	if err := e.pause(ctx); err != nil {
		return err
	}
	if err := s.ToolFinished(ctx, msg, call, nil, map[string]int{"words": len(strings.Fields(prompt))}, nil); err != nil {
		return err
	}

	if strings.Contains(strings.ToLower(prompt), "ask") {
		v, err := s.Wait(ctx, "question", map[string]string{"question": "Which tone should the answer have?"})
		if err != nil {
			return err
		}
		var tone string
		if json.Unmarshal(v, &tone) != nil {
			tone = string(v)
		}
		answer += "You asked for a " + tone + " tone. "
	}

	for _, word := range strings.SplitAfter(answer+filler, " ") {
		if err := e.pause(ctx); err != nil {
			return err
		}
		if err := s.Text(ctx, msg, word); err != nil {
			return err
		}
	}
	return s.FinishMessage(ctx, msg, tether.MessageDone)
}

func (e *echo) pause(ctx context.Context) error {
	t := time.NewTimer(e.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
