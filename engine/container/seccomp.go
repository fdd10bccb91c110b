package container

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
)

// The sandbox's seccomp profile (docs/SECURITY.md "Seccomp profile"). A
// custom profile replaces the runtime's default one, so it is an allow-list:
// a syscall not named here fails with ENOSYS (a new or unknown syscall looks
// like an old kernel, and glibc falls back), and the syscalls in
// seccompDenied fail with EPERM. Only the native 64-bit ABIs are allowed:
// 32-bit and x32 syscalls from a 64-bit process are refused by the runtime.

// seccompAllowed is what CPython, the data stack (numpy, pandas, scipy,
// scikit-learn, matplotlib) and subprocess, threads, multiprocessing and
// asyncio use: the runtime default list without the syscalls below.
var seccompAllowed = []string{
	"accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "cachestat", "capget", "capset", "chdir",
	"chmod", "chown", "clock_getres", "clock_gettime", "clock_nanosleep", "close", "close_range", "connect",
	"copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_pwait",
	"epoll_pwait2", "epoll_wait", "eventfd", "eventfd2", "execve", "exit", "exit_group", "faccessat", "faccessat2",
	"fadvise64", "fallocate", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fcntl",
	"fdatasync", "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat", "fstatfs",
	"fsync", "ftruncate", "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake", "futimesat",
	"get_mempolicy", "get_robust_list", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "geteuid",
	"getgid", "getgroups", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
	"getrandom", "getresgid", "getresuid", "getrlimit", "getrusage", "getsid", "getsockname", "getsockopt",
	"gettid", "gettimeofday", "getuid", "getxattr", "inotify_add_watch", "inotify_init", "inotify_init1",
	"inotify_rm_watch", "io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit",
	"ioctl", "ioprio_get", "ioprio_set", "kill", "landlock_add_rule", "landlock_create_ruleset",
	"landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat", "listen", "listxattr", "llistxattr",
	"lremovexattr", "lseek", "lsetxattr", "lstat", "madvise", "map_shadow_stack", "mbind", "membarrier", "mincore",
	"mkdir", "mkdirat", "mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr",
	"mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "mseal", "msgctl", "msgget",
	"msgrcv", "msgsnd", "msync", "munlock", "munlockall", "munmap", "nanosleep", "newfstatat", "open", "openat",
	"openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free",
	"pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv", "preadv2", "prlimit64", "pselect6", "pwrite64",
	"pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg",
	"recvmsg", "removexattr", "rename", "renameat", "renameat2", "restart_syscall", "rseq", "rt_sigaction",
	"rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"rt_tgsigqueueinfo", "sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity", "sched_getattr",
	"sched_getparam", "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity", "sched_setattr",
	"sched_setparam", "sched_setscheduler", "sched_yield", "seccomp", "select", "semctl", "semget", "semop",
	"semtimedop", "sendfile", "sendmmsg", "sendmsg", "sendto", "set_mempolicy", "set_robust_list",
	"set_tid_address", "setfsgid", "setfsuid", "setgid", "setgroups", "setitimer", "setpgid", "setpriority",
	"setregid", "setresgid", "setresuid", "setreuid", "setrlimit", "setsid", "setsockopt", "setuid", "setxattr",
	"shmat", "shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4", "socketpair",
	"splice", "stat", "statfs", "statx", "symlink", "symlinkat", "sync_file_range", "sysinfo", "tee",
	"tgkill", "time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime",
	"timerfd_create", "timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate", "umask", "uname",
	"unlink", "unlinkat", "utime", "utimensat", "utimes", "vfork", "wait4", "waitid", "write", "writev",
}

// seccompDenied are refused with EPERM, each for the reason given: they
// open the kernel attack surface or escape paths a notebook never needs.
// Most of them are allowed by podman's default profile.
var seccompDenied = map[string]string{
	"unshare":           "new namespaces: a user namespace gives full capabilities inside it",
	"setns":             "joining other namespaces",
	"mount":             "mounting (a tmpfs in a nested namespace beats noexec)",
	"umount2":           "unmounting",
	"pivot_root":        "changing the root",
	"chroot":            "changing the root",
	"move_mount":        "the new mount API",
	"open_tree":         "the new mount API",
	"fsopen":            "the new mount API",
	"fsconfig":          "the new mount API",
	"fsmount":           "the new mount API",
	"fspick":            "the new mount API",
	"mount_setattr":     "the new mount API",
	"memfd_create":      "anonymous executable files: exec via /proc/self/fd/N would beat noexec",
	"memfd_secret":      "anonymous memory files",
	"execveat":          "exec of a descriptor (fexecve)",
	"keyctl":            "the kernel keyring, shared by every process of one uid",
	"add_key":           "the kernel keyring",
	"request_key":       "the kernel keyring",
	"bpf":               "eBPF programs and maps",
	"perf_event_open":   "performance counters (side channels, kernel bugs)",
	"userfaultfd":       "a tool for kernel race exploits",
	"ptrace":            "tracing: user code could stop or inject into the supervisor",
	"process_vm_readv":  "reading another process's memory",
	"process_vm_writev": "writing another process's memory",
	"pidfd_getfd":       "stealing another process's descriptors",
	"kcmp":              "comparing kernel objects of other processes",
	"name_to_handle_at": "file handles",
	"open_by_handle_at": "file handles (the shocker escape)",
	"kexec_load":        "loading a kernel",
	"kexec_file_load":   "loading a kernel",
	"init_module":       "kernel modules",
	"finit_module":      "kernel modules",
	"delete_module":     "kernel modules",
	"syslog":            "the kernel log",
	"reboot":            "rebooting",
	"swapon":            "swap",
	"swapoff":           "swap",
	"acct":              "process accounting",
	"quotactl":          "disk quotas",
	"fanotify_init":     "filesystem-wide monitoring",
	"fanotify_mark":     "filesystem-wide monitoring",
	"lookup_dcookie":    "kernel profiling",
	"iopl":              "I/O ports",
	"ioperm":            "I/O ports",
	"modify_ldt":        "16-bit segments",
	"process_mrelease":  "reaping other processes",
	"sync":              "flushing every host filesystem (a host-wide stall)",
	"syncfs":            "flushing a whole host filesystem, shared with other users (a stall like sync's)",
	"sethostname":       "the host name",
	"setdomainname":     "the domain name",
	"settimeofday":      "the clock",
	"clock_settime":     "the clock",
	"clock_adjtime":     "the clock",
	"adjtimex":          "the clock",
	"vhangup":           "terminals",
	"remap_file_pages":  "a deprecated syscall with a history of bugs",
}

// Linux constants the argument rules use.
const (
	errnoEPERM  = 1
	errnoENOSYS = 38
	// cloneNamespaceFlags is CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET.
	cloneNamespaceFlags = 0x7E020000
	afPacket            = 17 // families from here up, and unlisted lower ones, are refused
	afUnix              = 1
	afInet              = 2
	afInet6             = 10
	afNetlink           = 16
)

// seccompFamilies are the socket families allowed: unix sockets
// (multiprocessing), loopback IPv4/IPv6 (there is no network) and netlink
// (getaddrinfo's interface check).
var seccompFamilies = []uint64{afUnix, afInet, afInet6, afNetlink}

// podSeccompFamilies are the families allowed in a Kubernetes sandbox pod:
// no AF_INET or AF_INET6. A pod always has an interface on the pod network,
// and only a CNI plugin that enforces NetworkPolicy would keep it off that
// network; refusing the sockets keeps a sandbox off the network whatever
// the CNI (the in-sandbox link is the pod's stdin and stdout).
var podSeccompFamilies = []uint64{afUnix, afNetlink}

type seccompArg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo"`
	Op       string `json:"op"`
}

type seccompRule struct {
	Names    []string     `json:"names"`
	Action   string       `json:"action"`
	ErrnoRet *uint        `json:"errnoRet,omitempty"`
	Args     []seccompArg `json:"args,omitempty"`
	Comment  string       `json:"comment,omitempty"`
}

type seccompArch struct {
	Architecture     string   `json:"architecture"`
	SubArchitectures []string `json:"subArchitectures"`
}

type seccompProfile struct {
	DefaultAction   string        `json:"defaultAction"`
	DefaultErrnoRet uint          `json:"defaultErrnoRet"`
	ArchMap         []seccompArch `json:"archMap"`
	Syscalls        []seccompRule `json:"syscalls"`
}

func errnoRule(names []string, errno uint, comment string, args ...seccompArg) seccompRule {
	return seccompRule{Names: names, Action: "SCMP_ACT_ERRNO", ErrnoRet: &errno, Args: args, Comment: comment}
}

func eqArg(index uint, v uint64) seccompArg {
	return seccompArg{Index: index, Value: v, Op: "SCMP_CMP_EQ"}
}

// SeccompProfile returns the built-in profile as JSON in the format podman
// and docker read (`--security-opt seccomp=<file>`). The output is
// deterministic, so its hash names the file.
func SeccompProfile() []byte {
	return seccompProfileFor(seccompFamilies)
}

// PodSeccompProfile is SeccompProfile for Kubernetes sandbox pods, in the
// same format (the kubelet's Localhost profiles): it also refuses AF_INET
// and AF_INET6 sockets (podSeccompFamilies says why).
func PodSeccompProfile() []byte {
	return seccompProfileFor(podSeccompFamilies)
}

// seccompProfileFor is the built-in profile allowing socket families.
func seccompProfileFor(families []uint64) []byte {
	denied := make([]string, 0, len(seccompDenied))
	for name := range seccompDenied {
		denied = append(denied, name)
	}
	sort.Strings(denied)
	rules := []seccompRule{
		{Names: seccompAllowed, Action: "SCMP_ACT_ALLOW"},
		// clone without namespace flags: fork, vfork, threads.
		{Names: []string{"clone"}, Action: "SCMP_ACT_ALLOW", Comment: "clone without CLONE_NEW* flags",
			Args: []seccompArg{{Index: 0, Value: cloneNamespaceFlags, ValueTwo: 0, Op: "SCMP_CMP_MASKED_EQ"}}},
		// clone with any CLONE_NEW* flag: one EPERM rule per flag below.
		// clone3 passes its flags in memory, which seccomp cannot read:
		// ENOSYS makes glibc fall back to clone, which is filtered above.
		errnoRule([]string{"clone3"}, errnoENOSYS, "flags in memory cannot be filtered; glibc falls back to clone"),
		errnoRule(denied, errnoEPERM, "see seccompDenied in engine/container/seccomp.go"),
		errnoRule([]string{"socket"}, errnoEPERM, "AF_PACKET, AF_VSOCK, AF_ALG and every family above",
			seccompArg{Index: 0, Value: afPacket, Op: "SCMP_CMP_GE"}),
	}
	for bit := uint64(1); bit <= cloneNamespaceFlags; bit <<= 1 {
		if bit&cloneNamespaceFlags != 0 {
			rules = append(rules, errnoRule([]string{"clone"}, errnoEPERM, "",
				seccompArg{Index: 0, Value: bit, ValueTwo: bit, Op: "SCMP_CMP_MASKED_EQ"}))
		}
	}
	for fam := uint64(0); fam < afPacket; fam++ {
		rule := errnoRule([]string{"socket"}, errnoEPERM, "", eqArg(0, fam))
		for _, ok := range families {
			if fam == ok {
				rule = seccompRule{Names: []string{"socket"}, Action: "SCMP_ACT_ALLOW", Args: []seccompArg{eqArg(0, fam)}}
			}
		}
		rules = append(rules, rule)
	}
	// personality: only the queries and flags the runtime default allows.
	for _, p := range []uint64{0, 8, 0x20000, 0x20008, 0xffffffff} {
		rules = append(rules, seccompRule{Names: []string{"personality"}, Action: "SCMP_ACT_ALLOW", Args: []seccompArg{eqArg(0, p)}})
	}
	out, err := json.MarshalIndent(seccompProfile{
		DefaultAction:   "SCMP_ACT_ERRNO",
		DefaultErrnoRet: errnoENOSYS,
		ArchMap: []seccompArch{
			{Architecture: "SCMP_ARCH_X86_64", SubArchitectures: []string{}},
			{Architecture: "SCMP_ARCH_AARCH64", SubArchitectures: []string{}},
		},
		Syscalls: rules,
	}, "", "  ")
	if err != nil {
		panic(err) // static data: cannot fail
	}
	return append(out, '\n')
}

// writeSeccompProfile writes the built-in profile to
// <state>/.bridge/seccomp-<hash>.json once and returns its path. The name is
// the content's hash, so a changed profile never reuses an old file, and an
// existing file with that name is the same profile.
func writeSeccompProfile(stateDir string) (string, error) {
	data := SeccompProfile()
	sum := sha256.Sum256(data)
	dir := filepath.Join(stateDir, ".bridge")
	path := filepath.Join(dir, "seccomp-"+hex.EncodeToString(sum[:6])+".json")
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".seccomp-*")
	if err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	// The container CLI (and docker's client) reads the file as this user.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	return path, nil
}

// confinement returns the seccomp profile file for --security-opt (""
// with MCP_BRIDGE_SECCOMP=runtime) and the id maps for per-session user
// namespaces, computed once, so every session has its own host uid
// (keyrings, RLIMIT_NPROC and inotify limits are per user). Rootful podman
// gets them when /etc/subuid and /etc/subgid have a range for the
// "containers" user, rootless podman from the user's own ranges (see
// rootlessIDs). gVisor (runsc) keeps those per sandbox in its own kernel;
// docker is described in docs/SECURITY.md.
func (l *Launcher) confinement(podman bool) (seccomp string, ids *idBlocks, err error) {
	l.confineOnce.Do(func() {
		switch s := l.cfg.Seccomp; s {
		case "":
			l.seccomp, l.confineErr = writeSeccompProfile(l.cfg.StateDir)
		case "runtime":
		default:
			if _, err := os.Stat(s); err != nil {
				l.confineErr = fmt.Errorf("seccomp profile (MCP_BRIDGE_SECCOMP): %w", err)
			}
			l.seccomp = s
		}
		if !podman || filepath.Base(l.cfg.OCIRuntime) == "runsc" {
			return
		}
		if os.Geteuid() != 0 {
			l.ids = rootlessIDs(l.cfg)
			return
		}
		if b, ok := newIDBlocks("/etc/subuid", "/etc/subgid", idBlockDir()); ok {
			l.ids = b
			return
		}
		l.log.Warn().Msg("rootful podman: /etc/subuid and /etc/subgid have no range for user 'containers', so every " +
			"session runs as the same host uid; add 'containers:2147483647:2147483648' to both files for a user namespace per session")
	})
	return l.seccomp, l.ids, l.confineErr
}

// rootlessIDs returns single-id maps for rootless podman, or nil (every
// session of the user shares one host uid) when a mount needs keep-id (the
// mount's files must be the user's), the sandbox user is not the default
// 65534, or the user has no subuid and subgid ranges (podman itself then
// fails to start).
func rootlessIDs(cfg Config) *idBlocks {
	if len(cfg.Mounts) > 0 || cfg.ContainerUser != fmt.Sprintf("%d:%d", sandboxID, sandboxID) {
		return nil
	}
	u, err := user.Current()
	if err != nil {
		return nil
	}
	b, _ := newSingleIDs("/etc/subuid", "/etc/subgid", idBlockDir(), u.Username, u.Uid)
	return b
}
