package route

import (
	"iter"
	"maps"
)

// layer is a map that versions of the table share: a large base no
// version writes once it is shared, and each version's own recent changes
// on top (set keys, and keys gone from the base). A change then copies
// only the changes since the base, not the whole map: with 100,000 routes
// a full copy took 100–200 ms a change, this takes microseconds. When the
// changes grow past a share of the base, flatten folds them into a new
// base.
type layer[K comparable, V any] struct {
	base map[K]V        // shared: never written
	over map[K]V        // this version's: set since base
	gone map[K]struct{} // this version's: deleted from base
	n    int
}

func newLayer[K comparable, V any]() layer[K, V] {
	return layer[K, V]{base: map[K]V{}, over: map[K]V{}, gone: map[K]struct{}{}}
}

func (l *layer[K, V]) get(k K) (V, bool) {
	if len(l.over) > 0 {
		if v, ok := l.over[k]; ok {
			return v, true
		}
	}
	if len(l.gone) > 0 {
		if _, ok := l.gone[k]; ok {
			var zero V
			return zero, false
		}
	}
	v, ok := l.base[k]
	return v, ok
}

// at is get without the presence.
func (l *layer[K, V]) at(k K) V { v, _ := l.get(k); return v }

func (l *layer[K, V]) set(k K, v V) {
	if _, ok := l.get(k); !ok {
		l.n++
	}
	l.over[k] = v
	delete(l.gone, k)
}

func (l *layer[K, V]) del(k K) {
	if _, ok := l.get(k); !ok {
		return
	}
	l.n--
	delete(l.over, k)
	if _, ok := l.base[k]; ok {
		l.gone[k] = struct{}{}
	}
}

func (l *layer[K, V]) len() int { return l.n }

// all yields every entry, in no order.
func (l *layer[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, v := range l.over {
			if !yield(k, v) {
				return
			}
		}
		for k, v := range l.base {
			if _, ok := l.over[k]; ok {
				continue
			}
			if _, ok := l.gone[k]; ok {
				continue
			}
			if !yield(k, v) {
				return
			}
		}
	}
}

// clone is a new version sharing the base.
func (l *layer[K, V]) clone() layer[K, V] {
	return layer[K, V]{base: l.base, over: maps.Clone(l.over), gone: maps.Clone(l.gone), n: l.n}
}

// heavy reports whether the changes have grown enough to flatten.
func (l *layer[K, V]) heavy() bool { return len(l.over)+len(l.gone) > max(256, len(l.base)/32) }

// flat is the same map with its changes folded into a new base.
func (l *layer[K, V]) flat() layer[K, V] {
	b := make(map[K]V, l.n)
	for k, v := range l.all() {
		b[k] = v
	}
	return layer[K, V]{base: b, over: map[K]V{}, gone: map[K]struct{}{}, n: l.n}
}
