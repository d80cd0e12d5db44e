package main

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// helpFlag is one flag as "tether <command> -h" prints it.
type helpFlag struct {
	env, def string
}

// helpFlags runs "tether <command> -h" and returns its flags by name.
func helpFlags(t *testing.T, name string, cmd func(context.Context, []string, func(string) string, io.Writer, io.Writer) error) map[string]helpFlag {
	t.Helper()
	var out strings.Builder
	_ = cmd(context.Background(), []string{"-h"}, noEnv, io.Discard, &out)
	flags := map[string]helpFlag{}
	head := regexp.MustCompile(`^  -([a-z0-9-]+)`)
	env := regexp.MustCompile(`\(\$([A-Z0-9_]+)`)
	def := regexp.MustCompile(`\(default (.*)\)$`)
	var cur string
	for _, line := range strings.Split(out.String(), "\n") {
		if m := head.FindStringSubmatch(line); m != nil {
			cur = m[1]
			flags[cur] = helpFlag{}
			continue
		}
		if cur == "" || !strings.HasPrefix(line, "    \t") {
			continue
		}
		f := flags[cur]
		// The variable is the last "($NAME" of the usage: a usage may name
		// another variable before it ("or $GOMEMLIMIT").
		if all := env.FindAllStringSubmatch(line, -1); all != nil {
			f.env = all[len(all)-1][1]
		}
		if m := def.FindStringSubmatch(line); m != nil {
			f.def = strings.Trim(m[1], `"`)
		}
		flags[cur] = f
	}
	if len(flags) < 2 {
		t.Fatalf("tether %s -h printed %d flags:\n%s", name, len(flags), out.String())
	}
	return flags
}

// README's flag table has a row for every flag of "tether serve -h", with
// its environment variable and its default, and no row for a flag that
// does not exist.
func TestReadmeFlagTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| flag | env | default | what |")
	if !ok {
		t.Fatal("README.md has no flag table")
	}
	flags := helpFlags(t, "serve", serveCmd)
	// Defaults the server works out when the flag is empty; the table says
	// how, in words.
	computed := map[string]bool{"public-url": true}
	name := regexp.MustCompile("`--([a-z0-9-]+)")
	envName := regexp.MustCompile("`(TETHER_[A-Z0-9_]+)`")
	first := regexp.MustCompile("^`([^`]*)`")
	seen := map[string]bool{}
	for _, row := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(row, "|") {
			break
		}
		cells := strings.Split(row, " | ")
		if len(cells) < 4 {
			t.Errorf("README.md: flag row %q has too few cells", row)
			continue
		}
		names := name.FindAllStringSubmatch(cells[0], -1)
		envs := envName.FindAllStringSubmatch(cells[1], -1)
		if len(names) == 0 || len(names) != len(envs) {
			t.Errorf("README.md: flag row %q: %d flags, %d variables", row, len(names), len(envs))
			continue
		}
		for i, n := range names {
			f, ok := flags[n[1]]
			seen[n[1]] = true
			if !ok {
				t.Errorf("README.md names --%s, which tether serve does not have", n[1])
				continue
			}
			if envs[i][1] != f.env {
				t.Errorf("README.md: --%s reads %s, tether serve -h says %s", n[1], envs[i][1], f.env)
			}
			if computed[n[1]] {
				continue
			}
			var doc string
			switch cell := strings.TrimSpace(cells[2]); {
			case strings.HasPrefix(cell, "—"):
			case strings.HasPrefix(cell, "off"):
				doc = "false"
			default:
				m := first.FindStringSubmatch(cell)
				if m == nil {
					t.Errorf("README.md: --%s has default %q, neither `value`, — nor off", n[1], cell)
					continue
				}
				doc = m[1]
			}
			if !sameDefault(doc, f.def) {
				t.Errorf("README.md: --%s defaults to %q, tether serve -h says %q", n[1], doc, f.def)
			}
		}
	}
	for n := range flags {
		if !seen[n] {
			t.Errorf("tether serve has --%s, which README.md's flag table does not list", n)
		}
	}
}

// sameDefault reports whether a default in README and one in the help
// are the same value: "10m" is "10m0s", "0" and "" are no value.
func sameDefault(doc, help string) bool {
	if doc == help || (doc == "0" || doc == "false") && help == "" {
		return true
	}
	a, errA := time.ParseDuration(doc)
	b, errB := time.ParseDuration(help)
	return errA == nil && errB == nil && a == b
}

// README says that every client command takes --server (TETHER_SERVER,
// default http://127.0.0.1:8080) and --token.
func TestReadmeClientFlags(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const says = "take `--server` (`TETHER_SERVER`, default `http://127.0.0.1:8080`)\nand `--token`"
	if !strings.Contains(string(b), says) {
		t.Fatalf("README.md no longer says %q: change this test with it", says)
	}
	for _, c := range commands() {
		if c.name == "serve" || c.name == "version" {
			continue
		}
		flags := helpFlags(t, c.name, c.run)
		if f := flags["server"]; f.env != "TETHER_SERVER" || f.def != "http://127.0.0.1:8080" {
			t.Errorf("tether %s --server: %+v", c.name, f)
		}
		if f, ok := flags["token"]; !ok || f.env != "TETHER_TOKEN" {
			t.Errorf("tether %s --token: %+v, %v", c.name, f, ok)
		}
	}
}
