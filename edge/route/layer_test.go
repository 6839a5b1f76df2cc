package route

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// TestLayerMatchesMap runs random sets and deletes on a layer, cloning
// and flattening it along the way, against a plain map; every version
// taken must keep what it held when it was taken.
func TestLayerMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	l := newLayer[int, int]()
	want := map[int]int{}
	type version struct {
		l    layer[int, int]
		want map[int]int
	}
	var old []version
	check := func(l *layer[int, int], want map[int]int, when string) {
		t.Helper()
		if l.len() != len(want) {
			t.Fatalf("%s: len %d, want %d", when, l.len(), len(want))
		}
		got := map[int]int{}
		for k, v := range l.all() {
			if _, dup := got[k]; dup {
				t.Fatalf("%s: key %d yielded twice", when, k)
			}
			got[k] = v
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: got %v, want %v", when, got, want)
		}
		for k := range 600 {
			v, ok := l.get(k)
			wv, wok := want[k]
			if v != wv || ok != wok {
				t.Fatalf("%s: get(%d) = %d, %v, want %d, %v", when, k, v, ok, wv, wok)
			}
		}
	}
	for i := range 20000 {
		k := r.IntN(600)
		switch r.IntN(10) {
		case 0, 1, 2:
			l.del(k)
			delete(want, k)
		default:
			l.set(k, i)
			want[k] = i
		}
		switch {
		case i%97 == 0:
			old = append(old, version{l, maps.Clone(want)})
			l = l.clone()
		case l.heavy():
			l = l.flat()
		}
	}
	check(&l, want, "last")
	for i, v := range old {
		check(&v.l, v.want, fmt.Sprint("version ", i))
	}
}
