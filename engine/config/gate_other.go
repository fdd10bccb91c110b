//go:build !linux

package config

import "errors"

// eventQueue has no implementation here: every Stamp is fresh.
type eventQueue struct{}

func openEventQueue() (*eventQueue, error) { return nil, errors.New("no file events on this platform") }

func (*eventQueue) close()                          {}
func (*eventQueue) watch(map[string]*watchDir) bool { return false }
func (*eventQueue) quiet() bool                     { return false }
