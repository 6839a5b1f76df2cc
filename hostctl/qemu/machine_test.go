package qemu

import "testing"

func TestParseMachine(t *testing.T) {
	t.Parallel()
	m := machine{Accel: "tcg", Size: Size{CPUs: 2, MemoryMB: 4096}}
	if got, err := parseMachine(m.String()); err != nil || got != m {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "tcg", "tcg 2", "hvf 2 4096", "tcg 0 4096", "tcg 2 -1", "tcg 2 4096 extra", "tcg x 4096", "tcg 2 4096x"} {
		if got, err := parseMachine(bad); err == nil {
			t.Errorf("%q: accepted as %+v", bad, got)
		}
	}
}

func FuzzParseMachine(f *testing.F) {
	f.Add("kvm 8 16384")
	f.Add("tcg 1 256\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseMachine(s)
		if err != nil {
			return
		}
		if again, err := parseMachine(m.String()); err != nil || again != m {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, m, m.String(), again, err)
		}
	})
}
