package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// childEnv makes the test binary act as tether itself: the resume
// scenario's tests start it as their server.
const childEnv = "TETHER_TEST_AS_TETHER"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
