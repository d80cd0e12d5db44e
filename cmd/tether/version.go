package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func versionCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version (or tether --version, tether -v)", env, stderr)
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tether version: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	fmt.Fprintln(stdout, "tether", versionString())
	return nil
}
