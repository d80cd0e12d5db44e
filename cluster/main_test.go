package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// bin is the tether binary, built once by TestMain for the tests that run
// nodes as processes (to kill them with SIGKILL).
var bin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tether-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "tether")
	gobin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster: the go command is needed to build tether:", err)
		return 1
	}
	build := exec.Command(gobin, "build", "-o", bin, "github.com/tetherhq/tether/cmd/tether")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster: build tether:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		// The spawner (proc_linux_test.go) lives as long as the binary.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/tetherhq/tether/cluster.spawner")); err != nil {
			fmt.Fprintln(os.Stderr, "cluster: goroutines leaked:", err)
			return 1
		}
	}
	return code
}
