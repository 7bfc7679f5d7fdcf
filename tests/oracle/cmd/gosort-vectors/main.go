// Command gosort-vectors prints the test vectors of core/src/scheduling/go_sort.rs: key lists
// and the permutation Go's sort.Slice leaves them in (ordered by key), one "keys|permutation"
// line each. Regenerate with `go run ./cmd/gosort-vectors > ../../core/src/scheduling/go_sort_vectors.txt`.
package main

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
)

func main() {
	r := rand.New(rand.NewSource(7))
	cases := []struct{ n, k int }{{5, 2}, {13, 2}, {13, 5}, {20, 3}, {49, 4}, {50, 3}, {64, 2}, {100, 6}, {150, 3}, {300, 10}, {700, 4}, {1000, 30}}
	for ci, c := range cases {
		keys := make([]int, c.n)
		for i := range keys {
			keys[i] = r.Intn(c.k)
		}
		if ci == 7 { // mostly decreasing
			for i := range keys {
				keys[i] = (c.n - i) / 10
			}
		}
		idx := make([]int, c.n)
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
		ks := make([]string, c.n)
		ps := make([]string, c.n)
		for i := range keys {
			ks[i] = fmt.Sprint(keys[i])
			ps[i] = fmt.Sprint(idx[i])
		}
		fmt.Printf("%s|%s\n", strings.Join(ks, ","), strings.Join(ps, ","))
	}
}
