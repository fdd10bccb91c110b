//go:build !linux

package container

// localLimitFacts: elsewhere (a podman machine, Docker Desktop) only the
// runtime probe knows. A variable for tests.
var localLimitFacts = func(podman bool) (RuntimeFacts, bool) { return RuntimeFacts{}, false }

// hybridCgroups: elsewhere the engine runs in a VM whose cgroups this host
// cannot see. A variable for tests.
var hybridCgroups = func() bool { return false }
