// Command tether is the Tether server and its command-line client.
//
//	tether serve     run the server (embedded store, demo agent, web page)
//	tether run       start a run on a server and print its answer as it streams
//	tether tail      follow a thread's events
//	tether threads   list threads with their status
//	tether cancel    cancel a run
//	tether answer    answer a run that waits for input
//	tether bench     load-test a server
//	tether version   print the version (also tether --version, -v)
//
// Run "tether <command> -h" for a command's flags. Every flag has an
// environment variable twin, shown in the help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if err != errUsage {
			fmt.Fprintln(os.Stderr, "tether:", err)
		}
		os.Exit(exitCode(err))
	}
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "run the server", serveCmd},
		{"run", "start a run and print its answer as it streams", runCmd},
		{"tail", "follow a thread's events", tailCmd},
		{"threads", "list threads with their status", threadsCmd},
		{"cancel", "cancel a run", cancelCmd},
		{"answer", "answer a run that waits for input", answerCmd},
		{"bench", "load-test a server", benchCmd},
		{"version", "print the version", versionCmd},
	}
}

func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "-v") {
		return versionCmd(ctx, args[1:], env, stdout, stderr)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], env, stdout, stderr)
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
	}
	fmt.Fprintf(stderr, "tether: unknown command %q\n\n", args[0])
	usage(stderr)
	return errUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Tether: durable, resumable streams for agent runs.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: tether <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "tether <command> -h" for the flags of a command; "tether --version" for the version.`)
}
