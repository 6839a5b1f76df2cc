package api

import "froog.tech/froog/internal/seal"

// sealer encrypts secrets for the store (package seal: URL tokens,
// variables, secret files, the setup script), so the API can show a
// private URL's link again, and hostctl write a sandbox's files, without
// the store holding them in the clear. What a value belongs to (a URL's
// id, an account and a path …) is bound in as additional data: a sealed
// value moved elsewhere does not open.
type sealer struct{ s *seal.Sealer }

func newSealer(key []byte) (*sealer, error) {
	s, err := seal.New(key)
	if err != nil {
		return nil, err
	}
	return &sealer{s: s}, nil
}

func (s *sealer) seal(plain, ad string) []byte { return s.s.Seal([]byte(plain), ad) }

func (s *sealer) open(sealed []byte, ad string) (string, error) {
	plain, err := s.s.Open(sealed, ad)
	return string(plain), err
}
