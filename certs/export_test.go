package certs

// Cached is how many leaves the local CA keeps.
func (ca *LocalCA) Cached() int {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return len(ca.leaves)
}

// Kind says which source Open chose: local-ca, wildcard or acme.
func (s *Source) Kind() string { return s.kind }
