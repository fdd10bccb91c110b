package actors

import "github.com/thejerf/suture/v4"

// serviceMap is a keyed set of live children under one supervisor (the
// model is syncthing's serviceMap): adding a key adds its service to the
// supervisor, removing a key removes it. The sessions and servers managers
// each hold one, owned by their Serve goroutine; it is not safe for
// concurrent use.
type serviceMap[K comparable, V any] struct {
	sup    *suture.Supervisor
	items  map[K]V
	tokens map[K]suture.ServiceToken
}

func newServiceMap[K comparable, V any](sup *suture.Supervisor) *serviceMap[K, V] {
	return &serviceMap[K, V]{sup: sup, items: map[K]V{}, tokens: map[K]suture.ServiceToken{}}
}

// Add records v under k and adds svc, v's service (or a supervisor of it),
// to the supervisor. k must not be present.
func (m *serviceMap[K, V]) Add(k K, v V, svc suture.Service) {
	m.items[k] = v
	m.tokens[k] = m.sup.Add(svc)
}

// Get returns the value under k.
func (m *serviceMap[K, V]) Get(k K) (V, bool) {
	v, ok := m.items[k]
	return v, ok
}

// Len is the number of live children.
func (m *serviceMap[K, V]) Len() int { return len(m.items) }

// Each calls fn for every child, in no order; fn may remove k.
func (m *serviceMap[K, V]) Each(fn func(k K, v V)) {
	for k, v := range m.items {
		fn(k, v)
	}
}

// Remove forgets k and has the supervisor stop its service without waiting
// for it: the supervisor waits for it when it stops itself.
func (m *serviceMap[K, V]) Remove(k K) error {
	tok, ok := m.tokens[k]
	if !ok {
		return nil
	}
	delete(m.items, k)
	delete(m.tokens, k)
	return m.sup.Remove(tok)
}
