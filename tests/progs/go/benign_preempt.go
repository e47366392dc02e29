// benign_preempt.go - more goroutines than Ps, each in a tight loop that
// calls a small leaf function (no stack check, so no synchronous
// preemption point): the scheduler preempts them asynchronously, a signal
// whose handler injects a call to runtime.asyncPreempt.  A signal that
// lands right after the leaf's return was recorded with the return going
// to asyncPreempt, and `btr check` reported a return-hijack there in about
// 1 of 4 runs (tests/cli_check.sh runs it several times).
package main

import (
	"fmt"
	"runtime"
)

//go:noinline
func step(s uint64, i uint64) uint64 {
	return s*6364136223846793005 + i
}

func main() {
	runtime.GOMAXPROCS(2)
	const workers = 8
	done := make(chan uint64, workers)
	for w := 0; w < workers; w++ {
		go func(w uint64) {
			s := w
			for i := uint64(0); i < 3000000; i++ {
				s = step(s, i)
			}
			done <- s
		}(uint64(w))
	}
	var x uint64
	for w := 0; w < workers; w++ {
		x ^= <-done
	}
	fmt.Println(x != 0)
}
