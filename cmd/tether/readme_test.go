package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
	// The list names every client command, and only those.
	_, list, _ := strings.Cut(string(b), "The client commands (")
	list, _, _ = strings.Cut(list, ")")
	named := regexp.MustCompile("`(?:tether )?([a-z]+)`").FindAllStringSubmatch(list, -1)
	var names, want []string
	for _, n := range named {
		names = append(names, n[1])
	}
	for _, c := range commands() {
		if c.name == "serve" || c.name == "version" {
			continue
		}
		want = append(want, c.name)
		flags := helpFlags(t, c.name, c.run)
		if f := flags["server"]; f.env != "TETHER_SERVER" || f.def != "http://127.0.0.1:8080" {
			t.Errorf("tether %s --server: %+v", c.name, f)
		}
		if f, ok := flags["token"]; !ok || f.env != "TETHER_TOKEN" {
			t.Errorf("tether %s --token: %+v, %v", c.name, f, ok)
		}
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("README.md's client commands are %v; tether has %v", names, want)
	}
}

// docFiles are the Markdown files a user reads, from the repository's
// root, without the dependencies'.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	docs := map[string]string{}
	err := filepath.WalkDir("../..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != "../.." || d.Name() == "node_modules" || d.Name() == "artifacts" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			docs[strings.TrimPrefix(p, "../../")] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// Every "tether COMMAND … --flag" the Markdown files write is a flag of
// that command, as "tether COMMAND -h" prints it: a flag renamed or
// dropped breaks the doc here, not for a reader who types it.
func TestDocsNameRealFlags(t *testing.T) {
	flags := map[string]map[string]helpFlag{}
	for _, c := range commands() {
		if c.name != "version" {
			flags[c.name] = helpFlags(t, c.name, c.run)
		}
	}
	cmdLine := regexp.MustCompile("tether (serve|run|tail|threads|cancel|answer|bench)\\b([^`\n]*)")
	flagName := regexp.MustCompile(`(?:^|[\s\[])--([a-z][a-z0-9-]*)`)
	checked := 0
	for name, doc := range docFiles(t) {
		for _, m := range cmdLine.FindAllStringSubmatch(doc, -1) {
			args, _, _ := strings.Cut(m[2], "#") // a shell comment names other commands' flags
			for _, f := range flagName.FindAllStringSubmatch(args, -1) {
				checked++
				if _, ok := flags[m[1]][f[1]]; !ok {
					t.Errorf("%s: tether %s --%s: tether %s has no such flag", name, m[1], f[1], m[1])
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d flags", checked)
	}
}

// A default the docs give beside a serve flag in words ("--lease-ttl
// (30 s)", "--heartbeat, 15 s", "--max-body (4 MiB)") is the flag's
// default, as "tether serve -h" prints it.
func TestDocsGiveServeDefaults(t *testing.T) {
	flags := helpFlags(t, "serve", serveCmd)
	said := regexp.MustCompile("`--([a-z][a-z0-9-]*)`(?: \\(|, )(\\d[\\d,]*) ?(ms|s|min|KiB|MiB|GiB)\\b")
	units := map[string]string{"ms": "ms", "s": "s", "min": "m"}
	sizes := map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
	checked := 0
	for name, doc := range docFiles(t) {
		if name == "docs/benchmarks.md" {
			continue // the flags of each measurement, not their defaults
		}
		for _, m := range said.FindAllStringSubmatch(strings.Join(strings.Fields(doc), " "), -1) {
			f, ok := flags[m[1]]
			if !ok {
				continue // another command's (TestDocsNameRealFlags)
			}
			n := strings.ReplaceAll(m[2], ",", "")
			want := n + units[m[3]]
			if size, ok := sizes[m[3]]; ok {
				v, _ := strconv.ParseInt(n, 10, 64)
				want = strconv.FormatInt(v*size, 10)
			}
			checked++
			if !sameDefault(want, f.def) {
				t.Errorf("%s: --%s is %s %s, tether serve -h says its default is %q", name, m[1], m[2], m[3], f.def)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d defaults", checked)
	}
}
