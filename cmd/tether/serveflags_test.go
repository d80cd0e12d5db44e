package main

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// A serve flag (or its environment twin) with a value it cannot mean — a
// duration or size that is zero or negative, replicas out of JetStream's
// range — is refused with a usage error (exit 2) that names it; it was
// replaced in silence by the default.
func TestServeRefusesBadFlagValues(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		flag string
	}{
		{args: []string{"--heartbeat", "-1s"}, flag: "--heartbeat"},
		{args: []string{"--max-stream-lifetime", "0"}, flag: "--max-stream-lifetime"},
		{args: []string{"--lease-ttl", "-5s"}, flag: "--lease-ttl"},
		{args: []string{"--cancel-grace", "0s"}, flag: "--cancel-grace"},
		{args: []string{"--sweep-interval", "0"}, flag: "--sweep-interval"},
		{args: []string{"--shutdown-grace", "-1s"}, flag: "--shutdown-grace"},
		{args: []string{"--write-timeout", "-1s"}, flag: "--write-timeout"},
		{args: []string{"--long-poll-timeout", "0"}, flag: "--long-poll-timeout"},
		{args: []string{"--max-body", "-1"}, flag: "--max-body"},
		{args: []string{"--max-event", "0"}, flag: "--max-event"},
		{args: []string{"--max-ws-subscriptions", "-3"}, flag: "--max-ws-subscriptions"},
		{args: []string{"--nats-replicas", "0"}, flag: "--nats-replicas"},
		{args: []string{"--nats-replicas", "7"}, flag: "--nats-replicas"},
		{args: []string{"--max-body-in-flight", "-7"}, flag: "--max-body-in-flight"},
		{args: []string{"--max-body-in-flight-per-key", "-2"}, flag: "--max-body-in-flight-per-key"},
		{env: map[string]string{"TETHER_MAX_BODY_IN_FLIGHT_PER_KEY": "-3"}, flag: "--max-body-in-flight-per-key"},
		{args: []string{"--run-concurrency", "0"}, flag: "--run-concurrency"},
		{args: []string{"--memory-limit", "0"}, flag: "--memory-limit"},
		{args: []string{"--memory-limit", "-5MiB"}, flag: "--memory-limit"},
		{args: []string{"--limit-streams", "-1"}, flag: "--limit-streams"},
		{args: []string{"--log-level", "loud"}, flag: "--log-level"},
		{args: []string{"--log-format", "xml"}, flag: "--log-format"},
		{args: []string{"--public-url", "tether.example.com"}, flag: "--public-url"},
		{env: map[string]string{"TETHER_LOG_LEVEL": "verbose"}, flag: "--log-level"},
		{args: []string{"--token", "short"}, flag: "--token"},
		{env: map[string]string{"TETHER_TOKEN": "0123456789abcdef0123\r"}, flag: "--token"},
		{env: map[string]string{"TETHER_HEARTBEAT": "-1s"}, flag: "--heartbeat"},
		{env: map[string]string{"TETHER_MAX_BODY": "0"}, flag: "--max-body"},
	}
	for _, c := range cases {
		name := strings.Join(c.args, "=")
		for k, v := range c.env {
			name += k + "=" + v
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a server that starts stops at once
			args := append([]string{"--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data")}, c.args...)
			env := func(k string) string { return c.env[k] }
			var stderr strings.Builder
			err := serveCmd(ctx, args, env, io.Discard, &stderr)
			if err != errUsage || !strings.Contains(stderr.String(), c.flag) {
				t.Fatalf("err %v, stderr %q: want a usage error naming %s", err, stderr.String(), c.flag)
			}
		})
	}
	// The values at the edge of what is allowed are taken.
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr strings.Builder
	err := serveCmd(ctx, []string{"--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
		"--shutdown-grace", "0", "--max-body-in-flight", "-1", "--max-body-in-flight-per-key", "-1", "--nats-replicas", "5", "--max-body", "1"}, noEnv, io.Discard, &stderr)
	if err == errUsage {
		t.Fatalf("edge values refused: %s", stderr.String())
	}
}

// A port another process holds (a second "bash scripts/serve", another
// service on 8080) stops serve with an error that says which address and
// how to choose another; it said only "bind: address already in use".
func TestServeAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	err = serveCmd(context.Background(), []string{"--addr", addr, "--data", filepath.Join(t.TempDir(), "data")}, noEnv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), "--addr") {
		t.Fatalf("err %v: want the address, that it is in use, and --addr", err)
	}
}

// The refusal to listen on all interfaces without keys names the address
// as given (0.0.0.0:PORT), not as the kernel reports it ([::]:PORT).
func TestServeRefusesOpenAddressAsGiven(t *testing.T) {
	err := serveCmd(context.Background(), []string{"--addr", "0.0.0.0:0", "--data", filepath.Join(t.TempDir(), "data")}, noEnv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "refusing to listen on 0.0.0.0:0 ") {
		t.Fatalf("err %v: want the refusal naming 0.0.0.0:0", err)
	}
	// The debug server's too.
	for _, public := range []string{"false", "true"} {
		err = serveCmd(context.Background(), []string{"--addr", "127.0.0.1:0", "--debug-addr", "0.0.0.0:0", "--debug-public=" + public, "--data", filepath.Join(t.TempDir(), "data")}, noEnv, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "the debug server on 0.0.0.0:0,") && !strings.Contains(err.Error(), "the debug server on 0.0.0.0:0 ") {
			t.Fatalf("--debug-public=%s: err %v: want the refusal naming 0.0.0.0:0", public, err)
		}
	}
}
