package main

import (
	"context"
	"errors"
	"io"
)

func benchCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	return errors.New("bench: not built yet")
}
