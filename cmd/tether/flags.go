package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// errUsage means the command line was wrong; the usage was printed.
var errUsage = errors.New("usage")

func exitCode(err error) int {
	if err == errUsage {
		return 2
	}
	return 1
}

// flagSet is a flag.FlagSet whose flags each have an environment twin,
// which sets the default and is named in the help.
type flagSet struct {
	*flag.FlagSet
	env  func(string) string
	errs []error
}

func newFlagSet(name, synopsis string, env func(string) string, stderr io.Writer) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), env: env}
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: tether %s\n", synopsis)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 { // a command without flags (version) has no Flags section
			fmt.Fprintf(stderr, "\nFlags (each also read from the environment variable shown):\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

func (fs *flagSet) envOr(name, def string) string {
	if v := fs.env(name); v != "" {
		return v
	}
	return def
}

func (fs *flagSet) String(name, envName, def, usage string) *string {
	return fs.FlagSet.String(name, fs.envOr(envName, def), usage+" ($"+envName+")")
}

// Secret is String for a secret (a token): the help does not show the
// value the environment variable gave as the default, so that -h never
// prints it on a screen or into a log.
func (fs *flagSet) Secret(name, envName, usage string) *string {
	p := new(string)
	fs.SecretVar(p, name, envName, usage)
	return p
}

// SecretVar is Secret into p.
func (fs *flagSet) SecretVar(p *string, name, envName, usage string) {
	fs.FlagSet.StringVar(p, name, "", usage+" ($"+envName+")")
	*p = fs.env(envName)
}

func (fs *flagSet) Bool(name, envName string, def bool, usage string) *bool {
	v := def
	if s := fs.env(envName); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			fs.errs = append(fs.errs, fmt.Errorf("$%s: %q is not a boolean", envName, s))
		}
		v = b
	}
	return fs.FlagSet.Bool(name, v, usage+" ($"+envName+")")
}

func (fs *flagSet) Int(name, envName string, def int, usage string) *int {
	v := def
	if s := fs.env(envName); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			fs.errs = append(fs.errs, fmt.Errorf("$%s: %q is not a whole number", envName, s))
		}
		v = n
	}
	return fs.FlagSet.Int(name, v, usage+" ($"+envName+")")
}

func (fs *flagSet) Duration(name, envName string, def time.Duration, usage string) *time.Duration {
	v := def
	if s := fs.env(envName); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			fs.errs = append(fs.errs, fmt.Errorf("$%s: %q is not a duration (like 15s)", envName, s))
		}
		v = d
	}
	return fs.FlagSet.Duration(name, v, usage+" ($"+envName+")")
}

// parse parses args; -h prints the help and returns flag.ErrHelp.
func (fs *flagSet) parse(args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return errors.Join(fs.errs...)
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checkServer refuses a --server that is not an http(s) URL with a host
// ("localhost:8080", as one types it): the client would fail every request
// with a transport error, and tail would retry it forever.
func checkServer(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--server ($TETHER_SERVER) must be an http:// or https:// URL, such as http://127.0.0.1:8080, not %q", s)
	}
	return nil
}
