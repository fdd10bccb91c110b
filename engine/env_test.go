package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine/config"
)

const testHome = "/home/tester"

// envOf returns a getenv over m; variables missing from m are unset ("").
func envOf(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

// defaultEnv is what LoadEnv must return for an empty environment and home
// testHome (SPEC §14, Default column).
func defaultEnv() Env {
	return Env{
		Runtime:                 "",
		Image:                   "localhost/bridge-python:latest",
		Timeout:                 30,
		MaxTimeout:              120,
		Memory:                  "512m",
		MemoryBytes:             512 << 20,
		Pids:                    128,
		CPUs:                    "",
		ContainerUser:           "65534:65534",
		IdleTimeout:             300,
		ServerIdle:              600,
		AllowSelfServer:         false,
		StateDir:                filepath.Join(testHome, "MCPs"),
		OutputMode:              "compact",
		LogLevel:                zerolog.InfoLevel,
		LogFormat:               "auto",
		ServersConfig:           "",
		ConfigDir:               filepath.Join(testHome, "MCPs"),
		OCIRuntime:              "",
		MaxOutputBytes:          32768,
		MaxFrameBytes:           16777216,
		CallTimeout:             60,
		ApprovalTimeout:         120,
		StartTimeout:            30,
		MaxSessions:             8,
		UnsafeLocal:             false,
		MaxImages:               10,
		MaxImageBytes:           1 << 20,
		MemoryMaxValue:          1 << 20,
		MemoryMaxTotal:          64 << 20,
		MemoryMaxKeys:           10_000,
		ConfigSources:           config.AllSources,
		Home:                    testHome,
		ProjectServers:          config.ProjectApproved,
		Structured:              "auto",
		AlwaysLoad:              true,
		Link:                    "auto",
		MaxSessionsPerPrincipal: 8,
		MaxCallsPerPrincipal:    4,
		MaxConnsPerAddr:         64,
		MaxIdentityConns:        64,
		Durability:              "cell",
		SnapshotMax:             1 << 30,
		SnapshotTotal:           8 << 30,
		SnapshotRetention:       7 * 24 * time.Hour,
		AuditCode:               "full",
		AuditMaxFile:            64 << 20,
		AuditRetention:          90 * 24 * time.Hour,
		KeyFile:                 testHome + "/.config/bridge/key",
		Kube:                    KubeEnv{PullPolicy: "IfNotPresent", WarmPool: 1},
	}
}

// TestLoadEnvDefaults checks every field of the Env that an empty
// environment yields, and that an environment of blank values is the same
// as an empty one (values are trimmed).
func TestLoadEnvDefaults(t *testing.T) {
	want := defaultEnv()
	got, err := LoadEnv(envOf(nil), testHome)
	if err != nil {
		t.Fatalf("LoadEnv(empty) error: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadEnv(empty)\n got %+v\nwant %+v", got, want)
	}
	blank := map[string]string{}
	for _, name := range EnvVars {
		blank[name] = " \t "
	}
	got, err = LoadEnv(envOf(blank), testHome)
	if err != nil {
		t.Fatalf("LoadEnv(blank values) error: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadEnv(blank values)\n got %+v\nwant %+v", got, want)
	}
}

// TestLoadEnvValid checks that a valid value of every variable is accepted
// and lands, normalised, in its field, with every other field at its default.
func TestLoadEnvValid(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		mod  func(*Env) // applied to defaultEnv() to get the wanted Env
	}{
		{"runtime name", map[string]string{"MCP_BRIDGE_RUNTIME": "docker"}, func(e *Env) { e.Runtime = "docker" }},
		{"runtime path trimmed", map[string]string{"MCP_BRIDGE_RUNTIME": " /usr/bin/podman\n"}, func(e *Env) { e.Runtime = "/usr/bin/podman" }},
		{"runtime local with unsafe local", map[string]string{"MCP_BRIDGE_RUNTIME": "local", "MCP_BRIDGE_UNSAFE_LOCAL": "1"},
			func(e *Env) { e.Runtime = "local"; e.UnsafeLocal = true }},
		{"project servers all", map[string]string{"MCP_BRIDGE_PROJECT_SERVERS": " ALL "}, func(e *Env) { e.ProjectServers = config.ProjectAll }},
		{"project servers none", map[string]string{"MCP_BRIDGE_PROJECT_SERVERS": "none"}, func(e *Env) { e.ProjectServers = config.ProjectNone }},
		{"image", map[string]string{"MCP_BRIDGE_IMAGE": "docker.io/library/python:3.12-slim"},
			func(e *Env) { e.Image = "docker.io/library/python:3.12-slim" }},
		{"timeout", map[string]string{"MCP_BRIDGE_TIMEOUT": "45"}, func(e *Env) { e.Timeout = 45 }},
		{"timeout 1", map[string]string{"MCP_BRIDGE_TIMEOUT": "1"}, func(e *Env) { e.Timeout = 1 }},
		{"timeout equal to default max", map[string]string{"MCP_BRIDGE_TIMEOUT": "120"}, func(e *Env) { e.Timeout = 120 }},
		{"timeout trimmed", map[string]string{"MCP_BRIDGE_TIMEOUT": " 60 "}, func(e *Env) { e.Timeout = 60 }},
		{"max timeout raised with timeout", map[string]string{"MCP_BRIDGE_MAX_TIMEOUT": "600", "MCP_BRIDGE_TIMEOUT": "600"},
			func(e *Env) { e.MaxTimeout = 600; e.Timeout = 600 }},
		{"max timeout 86400", map[string]string{"MCP_BRIDGE_MAX_TIMEOUT": "86400"}, func(e *Env) { e.MaxTimeout = 86400 }},
		{"max timeout below default timeout lowers the default", map[string]string{"MCP_BRIDGE_MAX_TIMEOUT": "10"},
			func(e *Env) { e.MaxTimeout = 10; e.Timeout = 10 }},
		{"memory g", map[string]string{"MCP_BRIDGE_MEMORY": "1g"}, func(e *Env) { e.Memory = "1g"; e.MemoryBytes = 1 << 30 }},
		{"memory uppercase", map[string]string{"MCP_BRIDGE_MEMORY": "512M"}, func(e *Env) { e.Memory = "512m"; e.MemoryBytes = 512 << 20 }},
		{"memory minimum 32m", map[string]string{"MCP_BRIDGE_MEMORY": "32m"}, func(e *Env) { e.Memory = "32m"; e.MemoryBytes = 32 << 20 }},
		{"memory k", map[string]string{"MCP_BRIDGE_MEMORY": "65536K"}, func(e *Env) { e.Memory = "65536k"; e.MemoryBytes = 64 << 20 }},
		{"memory bare bytes", map[string]string{"MCP_BRIDGE_MEMORY": "33554432"}, func(e *Env) { e.Memory = "33554432"; e.MemoryBytes = 32 << 20 }},
		{"memory b suffix", map[string]string{"MCP_BRIDGE_MEMORY": "33554432b"}, func(e *Env) { e.Memory = "33554432b"; e.MemoryBytes = 32 << 20 }},
		{"pids minimum", map[string]string{"MCP_BRIDGE_PIDS": "8"}, func(e *Env) { e.Pids = 8 }},
		{"pids large", map[string]string{"MCP_BRIDGE_PIDS": "4096"}, func(e *Env) { e.Pids = 4096 }},
		{"cpus integer", map[string]string{"MCP_BRIDGE_CPUS": "2"}, func(e *Env) { e.CPUs = "2" }},
		{"cpus decimal", map[string]string{"MCP_BRIDGE_CPUS": "1.5"}, func(e *Env) { e.CPUs = "1.5" }},
		{"cpus leading dot", map[string]string{"MCP_BRIDGE_CPUS": ".5"}, func(e *Env) { e.CPUs = ".5" }},
		{"cpus small trimmed", map[string]string{"MCP_BRIDGE_CPUS": " 0.25 "}, func(e *Env) { e.CPUs = "0.25" }},
		{"user uid:gid", map[string]string{"MCP_BRIDGE_CONTAINER_USER": "1000:1000"}, func(e *Env) { e.ContainerUser = "1000:1000" }},
		{"user name", map[string]string{"MCP_BRIDGE_CONTAINER_USER": "nobody"}, func(e *Env) { e.ContainerUser = "nobody" }},
		{"user name:group with dot and dash", map[string]string{"MCP_BRIDGE_CONTAINER_USER": "svc.user:grp-1"},
			func(e *Env) { e.ContainerUser = "svc.user:grp-1" }},
		{"idle timeout", map[string]string{"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "60"}, func(e *Env) { e.IdleTimeout = 60 }},
		{"idle timeout 0 disables", map[string]string{"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "0"}, func(e *Env) { e.IdleTimeout = 0 }},
		{"idle timeout negative disables", map[string]string{"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "-5"}, func(e *Env) { e.IdleTimeout = -5 }},
		{"server idle timeout", map[string]string{"MCP_BRIDGE_SERVER_IDLE_TIMEOUT": "30"}, func(e *Env) { e.ServerIdle = 30 }},
		{"server idle timeout 0 disables", map[string]string{"MCP_BRIDGE_SERVER_IDLE_TIMEOUT": "0"}, func(e *Env) { e.ServerIdle = 0 }},
		{"allow self server", map[string]string{"MCP_BRIDGE_ALLOW_SELF_SERVER": "true"}, func(e *Env) { e.AllowSelfServer = true }},
		{"state dir", map[string]string{"MCP_BRIDGE_STATE_DIR": "/var/lib/bridge"}, func(e *Env) { e.StateDir = "/var/lib/bridge" }},
		{"config dir", map[string]string{"MCP_BRIDGE_CONFIG_DIR": "/etc/bridge"}, func(e *Env) { e.ConfigDir = "/etc/bridge" }},
		{"servers config", map[string]string{"MCP_SERVERS_CONFIG": "/etc/mcp/servers.json"},
			func(e *Env) { e.ServersConfig = "/etc/mcp/servers.json" }},
		{"structured never", map[string]string{"MCP_BRIDGE_STRUCTURED": "Never"}, func(e *Env) { e.Structured = "never" }},
		{"structured always", map[string]string{"MCP_BRIDGE_STRUCTURED": "always"}, func(e *Env) { e.Structured = "always" }},
		{"link stdio", map[string]string{"MCP_BRIDGE_LINK": "STDIO"}, func(e *Env) { e.Link = "stdio" }},
		{"always load off", map[string]string{"MCP_BRIDGE_ALWAYS_LOAD": "0"}, func(e *Env) { e.AlwaysLoad = false }},
		{"always load on", map[string]string{"MCP_BRIDGE_ALWAYS_LOAD": "yes"}, func(e *Env) {}},
		{"tool inventory names", map[string]string{"MCP_BRIDGE_TOOL_INVENTORY": "NAMES"}, func(e *Env) { e.ToolInventory = "names" }},
		{"tool inventory off", map[string]string{"MCP_BRIDGE_TOOL_INVENTORY": "off"}, func(e *Env) {}},
		{"output mode toon", map[string]string{"MCP_BRIDGE_OUTPUT_MODE": "toon"}, func(e *Env) { e.OutputMode = "toon" }},
		{"output mode JSON any case", map[string]string{"MCP_BRIDGE_OUTPUT_MODE": "JSON"}, func(e *Env) { e.OutputMode = "json" }},
		{"output mode Compact", map[string]string{"MCP_BRIDGE_OUTPUT_MODE": " Compact "}, func(e *Env) { e.OutputMode = "compact" }},
		{"log level trace", map[string]string{"MCP_BRIDGE_LOG_LEVEL": "trace"}, func(e *Env) { e.LogLevel = zerolog.TraceLevel }},
		{"log level debug", map[string]string{"MCP_BRIDGE_LOG_LEVEL": "debug"}, func(e *Env) { e.LogLevel = zerolog.DebugLevel }},
		{"log level DEBUG", map[string]string{"MCP_BRIDGE_LOG_LEVEL": "DEBUG"}, func(e *Env) { e.LogLevel = zerolog.DebugLevel }},
		{"log level info", map[string]string{"MCP_BRIDGE_LOG_LEVEL": "info"}, func(e *Env) { e.LogLevel = zerolog.InfoLevel }},
		{"log level warn", map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"}, func(e *Env) { e.LogLevel = zerolog.WarnLevel }},
		{"log level warning", map[string]string{"MCP_BRIDGE_LOG_LEVEL": "Warning"}, func(e *Env) { e.LogLevel = zerolog.WarnLevel }},
		{"log level error", map[string]string{"MCP_BRIDGE_LOG_LEVEL": "error"}, func(e *Env) { e.LogLevel = zerolog.ErrorLevel }},
		{"log level critical", map[string]string{"MCP_BRIDGE_LOG_LEVEL": "critical"}, func(e *Env) { e.LogLevel = zerolog.FatalLevel }},
		{"oci runtime name", map[string]string{"MCP_BRIDGE_OCI_RUNTIME": "runsc"}, func(e *Env) { e.OCIRuntime = "runsc" }},
		{"oci runtime path", map[string]string{"MCP_BRIDGE_OCI_RUNTIME": "/usr/local/bin/crun"}, func(e *Env) { e.OCIRuntime = "/usr/local/bin/crun" }},
		{"max output minimum", map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "1024"}, func(e *Env) { e.MaxOutputBytes = 1024 }},
		{"max output equal to frame cap", map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "16777216"}, func(e *Env) { e.MaxOutputBytes = 16777216 }},
		{"max frame minimum lowers the image cap", map[string]string{"MCP_BRIDGE_MAX_FRAME_BYTES": "1048576"},
			func(e *Env) { e.MaxFrameBytes = 1048576; e.MaxImageBytes = (1<<20 - 64<<10) / 4 * 3 }},
		{"max frame raised with output", map[string]string{"MCP_BRIDGE_MAX_FRAME_BYTES": "67108864", "MCP_BRIDGE_MAX_OUTPUT_BYTES": "33554432"},
			func(e *Env) { e.MaxFrameBytes = 67108864; e.MaxOutputBytes = 33554432 }},
		{"call timeout bounds", map[string]string{"MCP_BRIDGE_CALL_TIMEOUT": "1"}, func(e *Env) { e.CallTimeout = 1 }},
		{"call timeout max", map[string]string{"MCP_BRIDGE_CALL_TIMEOUT": "86400"}, func(e *Env) { e.CallTimeout = 86400 }},
		{"start timeout max", map[string]string{"MCP_BRIDGE_START_TIMEOUT": "600"}, func(e *Env) { e.StartTimeout = 600 }},
		{"max sessions min", map[string]string{"MCP_BRIDGE_MAX_SESSIONS": "1"}, func(e *Env) { e.MaxSessions = 1 }},
		{"max sessions max", map[string]string{"MCP_BRIDGE_MAX_SESSIONS": "512"}, func(e *Env) { e.MaxSessions = 512 }},
		{"unsafe local alone", map[string]string{"MCP_BRIDGE_UNSAFE_LOCAL": "yes"}, func(e *Env) { e.UnsafeLocal = true }},
		{"max images 0 saves every image", map[string]string{"MCP_BRIDGE_MAX_IMAGES": "0"}, func(e *Env) { e.MaxImages = 0 }},
		{"max image bytes", map[string]string{"MCP_BRIDGE_MAX_IMAGE_BYTES": "4194304"}, func(e *Env) { e.MaxImageBytes = 4 << 20 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := defaultEnv()
			tt.mod(&want)
			got, err := LoadEnv(envOf(tt.env), testHome)
			if err != nil {
				t.Fatalf("LoadEnv(%q) error: %v", tt.env, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("LoadEnv(%q)\n got %+v\nwant %+v", tt.env, got, want)
			}
		})
	}
}

// TestLoadEnvBooleans checks that both boolean variables accept
// 1/true/yes/on and 0/false/no/off, trimmed and in any case, and reject
// anything else with the one-line error.
func TestLoadEnvBooleans(t *testing.T) {
	values := []struct {
		value string
		want  bool
	}{
		{"1", true}, {"true", true}, {"yes", true}, {"on", true},
		{"TRUE", true}, {" Yes ", true}, {"\toN\n", true}, {"True", true},
		{"0", false}, {"false", false}, {"no", false}, {"off", false},
		{"FALSE", false}, {" No ", false}, {"\tOfF\n", false}, {"", false},
	}
	fields := map[string]func(Env) bool{
		"MCP_BRIDGE_ALLOW_SELF_SERVER": func(e Env) bool { return e.AllowSelfServer },
		"MCP_BRIDGE_UNSAFE_LOCAL":      func(e Env) bool { return e.UnsafeLocal },
	}
	for name, field := range fields {
		for _, v := range values {
			t.Run(fmt.Sprintf("%s=%q", name, v.value), func(t *testing.T) {
				env, err := LoadEnv(envOf(map[string]string{name: v.value}), testHome)
				if err != nil {
					t.Fatalf("error: %v", err)
				}
				if got := field(env); got != v.want {
					t.Errorf("got %v, want %v", got, v.want)
				}
			})
		}
		for _, bad := range []string{"maybe", "2", "y", "n", "enabled", "-1", "truee"} {
			t.Run(fmt.Sprintf("%s=%q", name, bad), func(t *testing.T) {
				_, err := LoadEnv(envOf(map[string]string{name: bad}), testHome)
				want := fmt.Sprintf("invalid %s=%q: want a boolean (1/true/yes/on or 0/false/no/off)", name, bad)
				if err == nil || err.Error() != want {
					t.Errorf("got error %v, want %q", err, want)
				}
			})
		}
	}
}

// TestLoadEnvInvalid checks that a bad value of every validated variable is
// rejected with exactly the one-line message `invalid NAME="value": want ...`
// (CLI-1), which names the variable and quotes the value as given.
func TestLoadEnvInvalid(t *testing.T) {
	const (
		wantDash    = "a value that does not start with '-'"
		wantMemory  = "a size like 512m (digits with optional b/k/m/g), at least 32m"
		wantCPUs    = "a decimal number above 0"
		wantUser    = "user[:group] without a leading '-'"
		wantBool    = "a boolean (1/true/yes/on or 0/false/no/off)"
		wantLevel   = "one of trace, debug, info, warn, warning, error, critical"
		wantLocal   = "a container CLI; 'local' needs MCP_BRIDGE_UNSAFE_LOCAL=1 (tests only, no isolation)"
		wantIdle    = "an integer from -2147483648 to 2147483647"
		wantFrame   = "an integer from 1048576 to 2147483647"
		wantPids    = "an integer from 8 to 2147483647"
		wantTimeout = "an integer from 1 to 120"
	)
	tests := []struct {
		name  string
		env   map[string]string
		bad   string // the variable the error must name
		value string // its value as quoted in the error
		want  string // the text after "want "
	}{
		{"runtime dash", map[string]string{"MCP_BRIDGE_RUNTIME": "--privileged"}, "MCP_BRIDGE_RUNTIME", "--privileged", wantDash},
		{"runtime local without unsafe", map[string]string{"MCP_BRIDGE_RUNTIME": "local"}, "MCP_BRIDGE_RUNTIME", "local", wantLocal},
		{"runtime local with unsafe off", map[string]string{"MCP_BRIDGE_RUNTIME": "local", "MCP_BRIDGE_UNSAFE_LOCAL": "0"},
			"MCP_BRIDGE_RUNTIME", "local", wantLocal},
		{"image flag", map[string]string{"MCP_BRIDGE_IMAGE": "--privileged"}, "MCP_BRIDGE_IMAGE", "--privileged", wantDash},
		{"image dash after trim", map[string]string{"MCP_BRIDGE_IMAGE": " -v"}, "MCP_BRIDGE_IMAGE", " -v", wantDash},
		{"timeout abc (spec example)", map[string]string{"MCP_BRIDGE_TIMEOUT": "abc"}, "MCP_BRIDGE_TIMEOUT", "abc", wantTimeout},
		{"timeout above max timeout", map[string]string{"MCP_BRIDGE_TIMEOUT": "121"}, "MCP_BRIDGE_TIMEOUT", "121", wantTimeout},
		{"timeout above lowered max", map[string]string{"MCP_BRIDGE_MAX_TIMEOUT": "60", "MCP_BRIDGE_TIMEOUT": "61"},
			"MCP_BRIDGE_TIMEOUT", "61", "an integer from 1 to 60"},
		{"timeout 0", map[string]string{"MCP_BRIDGE_TIMEOUT": "0"}, "MCP_BRIDGE_TIMEOUT", "0", wantTimeout},
		{"timeout decimal", map[string]string{"MCP_BRIDGE_TIMEOUT": "1.5"}, "MCP_BRIDGE_TIMEOUT", "1.5", wantTimeout},
		{"max timeout 0", map[string]string{"MCP_BRIDGE_MAX_TIMEOUT": "0"}, "MCP_BRIDGE_MAX_TIMEOUT", "0", "an integer from 1 to 86400"},
		{"max timeout above a day", map[string]string{"MCP_BRIDGE_MAX_TIMEOUT": "86401"}, "MCP_BRIDGE_MAX_TIMEOUT", "86401", "an integer from 1 to 86400"},
		{"memory 31m", map[string]string{"MCP_BRIDGE_MEMORY": "31m"}, "MCP_BRIDGE_MEMORY", "31m", wantMemory},
		{"memory 1.5g", map[string]string{"MCP_BRIDGE_MEMORY": "1.5g"}, "MCP_BRIDGE_MEMORY", "1.5g", wantMemory},
		{"memory -1", map[string]string{"MCP_BRIDGE_MEMORY": "-1"}, "MCP_BRIDGE_MEMORY", "-1", wantMemory},
		{"memory mb", map[string]string{"MCP_BRIDGE_MEMORY": "512mb"}, "MCP_BRIDGE_MEMORY", "512mb", wantMemory},
		{"memory one byte under 32m", map[string]string{"MCP_BRIDGE_MEMORY": "33554431"}, "MCP_BRIDGE_MEMORY", "33554431", wantMemory},
		{"memory overflow", map[string]string{"MCP_BRIDGE_MEMORY": "8589934592g"}, "MCP_BRIDGE_MEMORY", "8589934592g", wantMemory},
		{"memory digits overflow", map[string]string{"MCP_BRIDGE_MEMORY": "99999999999999999999"}, "MCP_BRIDGE_MEMORY", "99999999999999999999", wantMemory},
		{"pids 7", map[string]string{"MCP_BRIDGE_PIDS": "7"}, "MCP_BRIDGE_PIDS", "7", wantPids},
		{"pids word", map[string]string{"MCP_BRIDGE_PIDS": "many"}, "MCP_BRIDGE_PIDS", "many", wantPids},
		{"pids with newline stays one line", map[string]string{"MCP_BRIDGE_PIDS": "12\n34"}, "MCP_BRIDGE_PIDS", "12\n34", wantPids},
		{"cpus 0", map[string]string{"MCP_BRIDGE_CPUS": "0"}, "MCP_BRIDGE_CPUS", "0", wantCPUs},
		{"cpus 0.0", map[string]string{"MCP_BRIDGE_CPUS": "0.0"}, "MCP_BRIDGE_CPUS", "0.0", wantCPUs},
		{"cpus abc", map[string]string{"MCP_BRIDGE_CPUS": "abc"}, "MCP_BRIDGE_CPUS", "abc", wantCPUs},
		{"cpus negative", map[string]string{"MCP_BRIDGE_CPUS": "-1"}, "MCP_BRIDGE_CPUS", "-1", wantCPUs},
		{"cpus exponent", map[string]string{"MCP_BRIDGE_CPUS": "1e3"}, "MCP_BRIDGE_CPUS", "1e3", wantCPUs},
		{"cpus Inf", map[string]string{"MCP_BRIDGE_CPUS": "Inf"}, "MCP_BRIDGE_CPUS", "Inf", wantCPUs},
		{"user -u", map[string]string{"MCP_BRIDGE_CONTAINER_USER": "-u"}, "MCP_BRIDGE_CONTAINER_USER", "-u", wantUser},
		{"user dash group", map[string]string{"MCP_BRIDGE_CONTAINER_USER": "1000:-g"}, "MCP_BRIDGE_CONTAINER_USER", "1000:-g", wantUser},
		{"user with space", map[string]string{"MCP_BRIDGE_CONTAINER_USER": "a b"}, "MCP_BRIDGE_CONTAINER_USER", "a b", wantUser},
		{"user empty group", map[string]string{"MCP_BRIDGE_CONTAINER_USER": "1000:"}, "MCP_BRIDGE_CONTAINER_USER", "1000:", wantUser},
		{"idle timeout word", map[string]string{"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "never"}, "MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", "never", wantIdle},
		{"idle timeout decimal", map[string]string{"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "1.5"}, "MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", "1.5", wantIdle},
		{"allow self server maybe", map[string]string{"MCP_BRIDGE_ALLOW_SELF_SERVER": "maybe"}, "MCP_BRIDGE_ALLOW_SELF_SERVER", "maybe", wantBool},
		{"output mode typo", map[string]string{"MCP_BRIDGE_OUTPUT_MODE": "tooon"}, "MCP_BRIDGE_OUTPUT_MODE", "tooon", "compact, toon or json"},
		{"log level verbose", map[string]string{"MCP_BRIDGE_LOG_LEVEL": "verbose"}, "MCP_BRIDGE_LOG_LEVEL", "verbose", wantLevel},
		{"oci runtime flag", map[string]string{"MCP_BRIDGE_OCI_RUNTIME": "--privileged"}, "MCP_BRIDGE_OCI_RUNTIME", "--privileged", wantDash},
		{"max output below 1024", map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "1023"}, "MCP_BRIDGE_MAX_OUTPUT_BYTES", "1023",
			"an integer from 1024 to 16777216"},
		{"max output above default frame cap", map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "16777217"}, "MCP_BRIDGE_MAX_OUTPUT_BYTES", "16777217",
			"an integer from 1024 to 16777216"},
		{"max output above lowered frame cap", map[string]string{"MCP_BRIDGE_MAX_FRAME_BYTES": "1048576", "MCP_BRIDGE_MAX_OUTPUT_BYTES": "2000000"},
			"MCP_BRIDGE_MAX_OUTPUT_BYTES", "2000000", "an integer from 1024 to 1048576"},
		{"max frame 1000", map[string]string{"MCP_BRIDGE_MAX_FRAME_BYTES": "1000"}, "MCP_BRIDGE_MAX_FRAME_BYTES", "1000", wantFrame},
		{"max frame one under 1 MiB", map[string]string{"MCP_BRIDGE_MAX_FRAME_BYTES": "1048575"}, "MCP_BRIDGE_MAX_FRAME_BYTES", "1048575", wantFrame},
		{"call timeout 0", map[string]string{"MCP_BRIDGE_CALL_TIMEOUT": "0"}, "MCP_BRIDGE_CALL_TIMEOUT", "0", "an integer from 1 to 86400"},
		{"call timeout above a day", map[string]string{"MCP_BRIDGE_CALL_TIMEOUT": "86401"}, "MCP_BRIDGE_CALL_TIMEOUT", "86401", "an integer from 1 to 86400"},
		{"approval timeout 0", map[string]string{"MCP_BRIDGE_APPROVAL_TIMEOUT": "0"}, "MCP_BRIDGE_APPROVAL_TIMEOUT", "0", "an integer from 1 to 86400"},
		{"start timeout 601", map[string]string{"MCP_BRIDGE_START_TIMEOUT": "601"}, "MCP_BRIDGE_START_TIMEOUT", "601", "an integer from 1 to 600"},
		{"start timeout 0", map[string]string{"MCP_BRIDGE_START_TIMEOUT": "0"}, "MCP_BRIDGE_START_TIMEOUT", "0", "an integer from 1 to 600"},
		{"max sessions 0", map[string]string{"MCP_BRIDGE_MAX_SESSIONS": "0"}, "MCP_BRIDGE_MAX_SESSIONS", "0", "an integer from 1 to 512"},
		{"max sessions 513", map[string]string{"MCP_BRIDGE_MAX_SESSIONS": "513"}, "MCP_BRIDGE_MAX_SESSIONS", "513", "an integer from 1 to 512"},
		{"unsafe local maybe", map[string]string{"MCP_BRIDGE_UNSAFE_LOCAL": "maybe"}, "MCP_BRIDGE_UNSAFE_LOCAL", "maybe", wantBool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadEnv(envOf(tt.env), testHome)
			if err == nil {
				t.Fatalf("LoadEnv(%q) = %+v, want an error", tt.env, got)
			}
			if !reflect.DeepEqual(got, Env{}) {
				t.Errorf("LoadEnv(%q) returned %+v with its error, want the zero Env", tt.env, got)
			}
			want := fmt.Sprintf("invalid %s=%q: want %s", tt.bad, tt.value, tt.want)
			if got := err.Error(); got != want {
				t.Errorf("LoadEnv(%q) error\n got %s\nwant %s", tt.env, got, want)
			}
			if msg := err.Error(); strings.ContainsAny(msg, "\r\n") {
				t.Errorf("error %q is not one line", msg)
			}
		})
	}
}

// TestLoadEnvSpecExample checks the CLI-1 example message word for word.
func TestLoadEnvSpecExample(t *testing.T) {
	_, err := LoadEnv(envOf(map[string]string{"MCP_BRIDGE_TIMEOUT": "abc"}), testHome)
	got, want := fmt.Sprint(err), `invalid MCP_BRIDGE_TIMEOUT="abc": want an integer from 1 to 120`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestLoadEnvEveryVarRejectsSomething checks, for every MCP_BRIDGE_* variable
// that has an invalid value, that TestLoadEnvInvalid covers it; the variables
// without one (directories and files, any string) are listed explicitly.
func TestLoadEnvEveryVarRejectsSomething(t *testing.T) {
	anyString := []string{"MCP_BRIDGE_STATE_DIR", "MCP_BRIDGE_CONFIG_DIR", "MCP_SERVERS_CONFIG", "MCP_BRIDGE_TOKENS_FILE"}
	bad := map[string]string{
		"MCP_BRIDGE_RUNTIME": "-x", "MCP_BRIDGE_IMAGE": "-x", "MCP_BRIDGE_TIMEOUT": "x",
		"MCP_BRIDGE_MAX_TIMEOUT": "x", "MCP_BRIDGE_MEMORY": "x", "MCP_BRIDGE_PIDS": "x", "MCP_BRIDGE_CPUS": "x",
		"MCP_BRIDGE_CONTAINER_USER": "-x", "MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "x", "MCP_BRIDGE_SERVER_IDLE_TIMEOUT": "soon", "MCP_BRIDGE_ALLOW_SELF_SERVER": "x",
		"MCP_BRIDGE_OUTPUT_MODE": "x", "MCP_BRIDGE_LOG_LEVEL": "x", "MCP_BRIDGE_OCI_RUNTIME": "-x",
		"MCP_BRIDGE_MAX_OUTPUT_BYTES": "x", "MCP_BRIDGE_MAX_FRAME_BYTES": "x", "MCP_BRIDGE_CALL_TIMEOUT": "x", "MCP_BRIDGE_APPROVAL_TIMEOUT": "x",
		"MCP_BRIDGE_START_TIMEOUT": "x", "MCP_BRIDGE_MAX_SESSIONS": "x", "MCP_BRIDGE_UNSAFE_LOCAL": "x",
		"MCP_BRIDGE_MAX_IMAGES": "101", "MCP_BRIDGE_MAX_IMAGE_BYTES": "1023", "MCP_BRIDGE_MOUNTS": "relative:/data",
		"MCP_BRIDGE_MEMORY_MAX_VALUE_BYTES": "100", "MCP_BRIDGE_MEMORY_MAX_TOTAL_BYTES": "x", "MCP_BRIDGE_MEMORY_MAX_KEYS": "0",
		"MCP_BRIDGE_CONFIG_SOURCES": "cursor,nope", "MCP_BRIDGE_PROJECT_SERVERS": "some",
		"MCP_BRIDGE_STRUCTURED": "x", "MCP_BRIDGE_ALWAYS_LOAD": "x", "MCP_BRIDGE_TOOL_INVENTORY": "x",
		"MCP_BRIDGE_SECCOMP":                    "relative.json",
		"MCP_BRIDGE_LOG_FORMAT":                 "yaml",
		"MCP_BRIDGE_LINK":                       "pipe",
		"MCP_BRIDGE_MAX_SESSIONS_PER_PRINCIPAL": "0", "MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL": "x", "MCP_BRIDGE_MAX_IDENTITY_CONNS": "0",
		"MCP_BRIDGE_MAX_CONNS_PER_ADDR": "-1",
		"MCP_BRIDGE_SESSION_DURABILITY": "always", "MCP_BRIDGE_SNAPSHOT_MAX": "1k", "MCP_BRIDGE_SNAPSHOT_TOTAL": "x",
		"MCP_BRIDGE_SNAPSHOT_RETENTION": "forever", "MCP_BRIDGE_KEY_FILE": "relative/key",
		"MCP_BRIDGE_AUDIT": "maybe", "MCP_BRIDGE_AUDIT_CODE": "none", "MCP_BRIDGE_AUDIT_MAX_FILE_BYTES": "1k", "MCP_BRIDGE_AUDIT_RETENTION": "forever",
		"MCP_BRIDGE_TRACE_VALUES":  "maybe",
		"MCP_BRIDGE_K8S_NAMESPACE": "Sandboxes", "MCP_BRIDGE_K8S_PULL_POLICY": "sometimes", "MCP_BRIDGE_K8S_WARM_POOL": "17",
		"MCP_BRIDGE_K8S_RUNTIME_CLASS": "g_visor", "MCP_BRIDGE_K8S_NODE_NAME": "node 1", "MCP_BRIDGE_K8S_SECCOMP_PROFILE": "/abs/profile.json",
	}
	for _, name := range EnvVars {
		value, ok := bad[name]
		if !ok {
			if !slices.Contains(anyString, name) {
				t.Errorf("%s has neither a bad value here nor is it listed as accepting any string", name)
			}
			continue
		}
		_, err := LoadEnv(envOf(map[string]string{name: value}), testHome)
		prefix := fmt.Sprintf("invalid %s=%q: want ", name, value)
		if err == nil || !strings.HasPrefix(err.Error(), prefix) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%q: got error %v, want one line starting %q", name, value, err, prefix)
		}
	}
	for _, name := range anyString {
		_, err := LoadEnv(envOf(map[string]string{name: "-odd dir/with spaces"}), testHome)
		if err != nil {
			t.Errorf("%s: got error %v, want any path accepted", name, err)
		}
	}
}

// TestLoadEnvReadsEveryListedVar checks that LoadEnv reads each variable in
// EnvVars: setting it to "-7" changes the result (a field or an error).
func TestLoadEnvReadsEveryListedVar(t *testing.T) {
	def, err := LoadEnv(envOf(nil), testHome)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range EnvVars {
		got, err := LoadEnv(envOf(map[string]string{name: "-7"}), testHome)
		if err == nil && reflect.DeepEqual(got, def) {
			t.Errorf("%s=-7 changed nothing: LoadEnv does not read it", name)
		}
	}
}

// TestEnvVarsMatchesSource checks that EnvVars lists exactly the variables
// named by string literals in the package's non-test source, with no
// duplicates.
func TestEnvVarsMatchesSource(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lit := regexp.MustCompile(`"(MCP_BRIDGE_[A-Z0-9_]+|MCP_SERVERS_CONFIG)"`)
	inSource := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lit.FindAllStringSubmatch(string(src), -1) {
			inSource[m[1]] = true
		}
	}
	listed := map[string]bool{}
	for _, name := range EnvVars {
		if listed[name] {
			t.Errorf("EnvVars lists %s twice", name)
		}
		listed[name] = true
	}
	got, want := sortedKeys(listed), sortedKeys(inSource)
	if !slices.Equal(got, want) {
		t.Errorf("EnvVars\n got %v\nwant (read in source) %v", got, want)
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestReadmeEnvTable checks that README's env table lists exactly the
// variables the code reads (SPEC §14).
func TestReadmeEnvTable(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ := strings.Cut(rest, "`")
			if strings.HasPrefix(name, "MCP_") {
				got = append(got, name)
			}
		}
	}
	want := append([]string(nil), EnvVars...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("README env table = %v\nvariables read = %v", got, want)
	}
}

// TestReadTraces: when the OTEL_* variables turn traces on, and which
// exporters and protocols are refused in one line.
func TestReadTraces(t *testing.T) {
	ep := "http://127.0.0.1:4318"
	cases := []struct {
		name    string
		env     map[string]string
		want    bool
		wantErr string
	}{
		{"nothing set", nil, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, true, ""},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep + "/v1/traces"}, true, ""},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{"exporter none wins", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ep}, false, ""},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, false, ""},
		{"sdk disabled only when true", map[string]string{"OTEL_SDK_DISABLED": "yes", "OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{"http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, true, ""},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, ""},
		{"http/json refused", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, false,
			`invalid OTEL_EXPORTER_OTLP_PROTOCOL="http/json": want http/protobuf or grpc`},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, true, ""},
		{"a protocol with traces off is not read", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, false, ""},
		{"zipkin refused", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, `invalid OTEL_TRACES_EXPORTER="zipkin": want otlp or none`},
		{"list with otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp, none"}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, err := LoadEnv(envOf(c.env), testHome)
			if c.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), c.wantErr) {
					t.Fatalf("LoadEnv = %v, want an error starting %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := env.Traces; got != c.want {
				t.Errorf("Traces = %v, want %v", got, c.want)
			}
		})
	}
}

// TestParseAge: days or a Go duration, never negative, never a partial
// number.
func TestParseAge(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90d", 90 * 24 * time.Hour, true},
		{"0d", 0, true},
		{"36h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"-1d", 0, false},
		{"-5m", 0, false},
		{"+5d", 0, false},
		{"05d", 0, false},
		{"36501d", 0, false},
		{"forever", 0, false},
		{"", 0, false},
	}
	for _, c := range cases {
		got, ok := ParseAge(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseAge(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
