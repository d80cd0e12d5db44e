//go:build linux || darwin

package main

import "syscall"

// raiseFileLimit raises this process's limit on open files towards want
// and returns the limit in force: the soft limit up to the hard one, and
// the hard one too where the process may (root, CAP_SYS_RESOURCE; up to
// fs.nr_open).
func raiseFileLimit(want uint64) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur >= want {
		return uint64(l.Cur), nil
	}
	if uint64(l.Max) < want {
		raised := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return want, nil
		}
	}
	l.Cur = min(want, uint64(l.Max))
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	return uint64(l.Cur), nil
}

// selfCPU returns the CPU seconds (user and system) this process used.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
