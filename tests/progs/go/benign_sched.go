// benign_sched.go - goroutines and channels, a goroutine whose stack grows
// (morestack copies it), panic/recover: Go's scheduler switches stacks
// with gogo.  `btr check` gave return-mismatch after each switch,
// return-hijack for every goroutine's return into goexit+1 and
// jump-non-entry for the jump to the recovery point (tests/cli_check.sh).
package main

import "fmt"

//go:noinline
func rec(n int, pad [8]int) int {
	if n == 0 {
		return pad[1]
	}
	pad[n%8] = n
	return rec(n-1, pad) + 1
}

//go:noinline
func bad(i int) int {
	if i%2 == 0 {
		panic("even")
	}
	return i
}

func try(i int) (r int) {
	defer func() {
		if recover() != nil {
			r = -1
		}
	}()
	return bad(i)
}

func main() {
	c, d := make(chan int), make(chan int)
	for w := 0; w < 2; w++ {
		go func() {
			for x := range c {
				d <- x * x
			}
		}()
	}
	go func() {
		for i := 0; i < 300; i++ {
			c <- i
		}
		close(c)
	}()
	s := 0
	for i := 0; i < 300; i++ {
		s += <-d
	}
	g := make(chan int)
	go func() { var p [8]int; g <- rec(3000, p) }()
	s += <-g
	for i := 0; i < 20; i++ {
		s += try(i)
	}
	fmt.Println(s)
}
